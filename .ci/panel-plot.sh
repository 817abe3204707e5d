# What the .ci plot scripts share (sourced): a PNG of panels on a grid of at most three columns,
# drawn by gnuplot from a script the caller writes. Paths and names go into the script's quoted
# strings and comments, so only plain characters reach it.

# plot_plain_path TOOL PATH: exits 2, naming TOOL, unless PATH has only plain characters.
plot_plain_path() {
  case $2 in
  *[!A-Za-z0-9._/-]*) echo "$1: '$2' is not a plain path" >&2; exit 2 ;;
  esac
}

# plot_plain NAME: NAME's base name, plain characters only (for the script's comment).
plot_plain() { basename "$1" | tr -cd 'A-Za-z0-9._-'; }

# plot_grid PANELS PNG TITLE: the script's terminal, sized for PANELS panels, its output (PNG.tmp,
# renamed by plot_draw) and the multiplot layout under TITLE (plain characters, as the caller
# made them).
plot_grid() {
  local cols=$(( $1 < 3 ? $1 : 3 )) rows
  rows=$(( ($1 + cols - 1) / cols ))
  echo "set terminal pngcairo size $((560 * cols)),$((420 * rows)) font ',9' noenhanced"
  echo "set output '$2.tmp'"
  echo "set multiplot layout $rows,$cols title '$3'"
}

# plot_draw TOOL GP PNG PANELS: runs gnuplot on GP, then puts the image in place.
plot_draw() {
  gnuplot "$2"
  mv "$3.tmp" "$3"
  echo "$1: wrote $3 ($4 panels)"
}
