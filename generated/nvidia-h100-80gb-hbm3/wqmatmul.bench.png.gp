# Draws wqmatmul.bench.png from wqmatmul.bench.csv (ktune bench wqmatmul): the tuned kernel's
# speedup over cuBLAS on the unquantized bf16 layer (the CSV's vs_anchor) against m, a line a bit
# width (groups of 128), a panel for each linear layer of Llama 3 70B on one GPU. Run in this
# folder: gnuplot wqmatmul.bench.png.gp
set terminal pngcairo size 1400,1000 font ',10' noenhanced
set output 'wqmatmul.bench.png'
set datafile separator whitespace
set multiplot layout 2,2 title "wqmatmul on NVIDIA H100 80GB HBM3: speedup over cuBLAS bf16 of the same layer (bf16 activations, groups of 128)"
set logscale x 2
set xlabel 'm (tokens)'
set ylabel 'cuBLAS bf16 time / tuned time'
set key top right
set grid
# rows of the CSV for one layer (n x k) and bit width: m, vs_anchor
series(nk, b) = sprintf("< awk -F, '$2 == \"bf16\" { split($3, s, \"x\"); if (s[1] == %d && s[2] == 128 && s[4] \"x\" s[5] == \"%s\") print s[3], $17 }' wqmatmul.bench.csv | sort -n", b, nk)
do for [layer in "10240x8192:qkv 8192x8192:o 57344x8192:gate_up 8192x28672:down"] {
    nk = substr(layer, 1, strstrt(layer, ":") - 1)
    set title sprintf("%s (n x k = %s)", substr(layer, strstrt(layer, ":") + 1, strlen(layer)), nk)
    plot for [b in "2 3 4 8"] series(nk, int(b)) using 1:2 with linespoints title sprintf("%s bits", b), \
         1 with lines dashtype 2 lc rgb 'black' title 'cuBLAS bf16'
}
unset multiplot
