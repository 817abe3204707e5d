#!/usr/bin/env bash
# make_inputs.sh DIR: writes the hostile spaces the `hostile_*` tests load into DIR. Generated at
# test time: some are megabytes of the same character.
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"

# space NAME VARIANTS DEFAULTS [SHAPES [KEY]]: a space of family h
space() {
    local shapes=${4:-"  - list: [{n: 8}]"} key=${5:-"  - {name: n}"}
    printf 'family: h\nkey:\n%s\nvariants:\n%s\ndefaults:\n%s\nshapes:\n%s\n' \
        "$key" "$2" "$3" "$shapes" >"$1.yaml"
}
repeat() { head -c "$2" /dev/zero | tr '\0' "$1"; }
constraint() { space "$1" "$(printf '  v:\n    params:\n      a: [1]\n    constraints:\n      - %s' "$2")" \
    "  - {variant: v, a: 1}"; }

# a default whose config name is longer than the names the space holds
p=pppppppppppppppppppppppp
space default_name_too_long \
    "$(printf '  v:\n    params:\n      %sa: [1]\n      %sb: [1]\n      %sc: [1]\n      %sd: [1]' $p $p $p $p)" \
    "  - {variant: v, ${p}a: 1048576, ${p}b: 1048576, ${p}c: 1048576, ${p}d: 1048576}"
# deep or long expressions
constraint parens_20000 "'$(repeat '(' 20000)1$(repeat ')' 20000)'"
constraint not_1000000 "'$(repeat '!' 1000000)1'"
constraint minus_1000000 "'$(repeat '-' 1000000)1'"
constraint sum_300000 "'$(yes 1 | head -n 300000 | paste -sd+)'"
# integers that are not plain decimal
space int_leading_zero "$(printf '  v:\n    params:\n      a: [010]')" "  - {variant: v, a: 10}"
space int_plus_sign "$(printf '  v:\n    params:\n      a: [+2]')" "  - {variant: v, a: 2}"
space int_tagged "$(printf '  v:\n    params:\n      a: [!!str 4]')" "  - {variant: v, a: 4}"
space default_twice "$(printf '  v:\n    params:\n      a: [1]')" \
    "$(printf '  - {variant: v, a: 1}\n  - {variant: v, a: 1}')"
# unbounded work: a grid whose where keeps nothing, many parameter values, a wide mapping
space grid_1e15 "$(printf '  v:\n    params:\n      a: [1]')" "  - {variant: v, a: 1}" \
    "$(printf '  - grid: {m: {from: 1, to: 100000, step: 1}, n: {from: 1, to: 100000, step: 1}, k: {from: 1, to: 100000, step: 1}}\n    where: m < 0')" \
    "$(printf '  - {name: m}\n  - {name: n}\n  - {name: k}')"
space values_300000 "      a: [$(seq -s, 0 299999)]" "  - {variant: v, a: 1}"
sed -i 's/^      a: \[0,/  v:\n    params:\n      a: [0,/' values_300000.yaml
space map_keys_2000 "$(printf '  v:\n    params:\n      a: [1]\n    doc: {%s}' "$(seq -f 'k%g: 1' -s, 1 2000)")" \
    "  - {variant: v, a: 1}"
# a --where that nests too deep
repeat '(' 20000 >where_parens.txt
# names in m4's or the templates' namespace
space key_kt4_keys "$(printf '  v:\n    params:\n      a: [1]')" "  - {variant: v, a: 1}" \
    "  - list: [{kt4_keys: 8}]" "  - {name: kt4_keys}"
space param_m4_dnl "$(printf '  v:\n    params:\n      m4_dnl: [1]')" "  - {variant: v, m4_dnl: 1}"
sed 's/^family: h$/family: m4_dnl/' default_twice.yaml >family_m4_dnl.yaml
