# Reading a committed registry in the host scripts (sourced): its device and its entries.

# registry_device FILE: the device name of the registry's header
registry_device() { sed -n 's/^device: {name: "\(.*\)", sms: .*/\1/p' "$1"; }

# registry_entries FILE: its entries, a line each (the runs' list is not among them)
registry_entries() { grep '^  - {' "$1" | grep -v '^  - {id:'; }

# registry_key LINE: an entry line's key as ktune takes it ("dtype=bf16 m=3 n=4096 k=4096")
registry_key() { sed 's/^[^{]*{//; s/, config:.*//; s/: /=/g; s/, / /g' <<<"$1"; }
