# shellcheck shell=bash
# Functions of tools/gpu.sh: copying programs with the libraries the GPU machine lacks,
# finding that machine's CUDA libraries, the library path of a run there, its GPU, and a model
# folder for random weights. Source it after defining die().

# Copies EXE to DEST (a file path), stripped, and the shared libraries it needs into LIB_DIR
# (once per name), except those the GPU machine provides: glibc's family, the driver and CUDA's
# libraries. ldd resolves the whole dependency tree, so indirect needs (libgfortran) come too.
bundle_exe() {
    local exe=$1 dest=$2 lib_dir=$3 lib path
    cp "$exe" "$dest"
    strip --strip-unneeded "$dest" 2>/dev/null || true
    while read -r lib path; do
        case $lib in
            linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libdl.so* | libpthread.so* | \
                librt.so* | libresolv.so* | libutil.so*) continue ;;
            libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | libnvidia*.so* | \
                libnvrtc*.so* | libnvJitLink*.so*) continue ;;
        esac
        [[ -f $path ]] || die "$exe needs $lib, which does not resolve here (LD_LIBRARY_PATH?)"
        [[ -f $lib_dir/$lib ]] || cp -L "$path" "$lib_dir/$lib"
    done < <(ldd "$exe" | awk '$2 == "=>" {print $1, $3}')
}

# Folders that may hold the CUDA runtime and cuBLASLt on the GPU machine: the toolkit's
# (CUDA_HOME, /usr/local/cuda*), then the nvidia-* wheels of python3 (PyTorch's venv carries
# the same libraries where the toolkit's are missing). Prints each once, in that order.
cuda_lib_dirs() {
    local d
    local -a wheels=()
    mapfile -t wheels < <(python3 -c 'import glob, site
for s in site.getsitepackages(): print(*glob.glob(s + "/nvidia/*/lib"), sep="\n")' 2>/dev/null)
    for d in ${CUDA_HOME:+"$CUDA_HOME"/lib64 "$CUDA_HOME"/targets/*-linux/lib} \
        /usr/local/cuda/lib64 /usr/local/cuda/targets/*-linux/lib /usr/local/cuda/lib \
        /usr/local/cuda-[0-9]*/lib64 /usr/local/cuda-[0-9]*/targets/*-linux/lib \
        ${wheels[@]+"${wheels[@]}"} /usr/local/lib/python3*/dist-packages/nvidia/*/lib; do
        if compgen -G "$d/libcublasLt.so.[0-9]*" >/dev/null ||
            compgen -G "$d/libcudart.so.[0-9]*" >/dev/null; then echo "$d"; fi
    done | awk '!seen[$0]++'
}

# The library path to run the programs EXE... with: LINKS (a folder this fills with links to
# the libraries of LIB_DIR that the programs cannot find otherwise, so the machine's own
# libraries win and only what it lacks comes from the bundle), the machine's CUDA library
# folders, then the caller's LD_LIBRARY_PATH. Linking a library in can surface its own missing
# needs (libgfortran for OpenBLAS), so those are linked in a second pass. Prints the path.
bundle_library_path() {
    local links=$1 lib_dir=$2 cuda_path exe
    shift 2
    cuda_path=$(cuda_lib_dirs | paste -sd: -)
    mkdir -p "$links"
    link_missing() {
        local lib
        while read -r lib; do
            if [[ -f $lib_dir/$lib ]]; then ln -sf "$lib_dir/$lib" "$links/$lib"; fi
        done < <(LD_LIBRARY_PATH=$links${cuda_path:+:$cuda_path} ldd "$1" 2>/dev/null |
            awk '/not found/ {print $1}')
    }
    for exe in "$@"; do link_missing "$exe"; done
    for exe in "$links"/*; do if [[ -e $exe ]]; then link_missing "$exe"; fi; done
    echo "$links${cuda_path:+:$cuda_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# Dies with a clear message unless an NVIDIA GPU answers here; WHAT names what needs it.
need_gpu() {
    command -v nvidia-smi >/dev/null || die "$1 needs an NVIDIA GPU and nvidia-smi is not on" \
        "this machine's PATH: run it on the GPU machine (here, 'bundle' runs without one)"
    nvidia-smi -L >/dev/null 2>&1 ||
        die "$1 needs an NVIDIA GPU: 'nvidia-smi -L' fails here: $(nvidia-smi -L 2>&1 | head -1)"
}

# Total memory in MiB of the GPU the programs will use (the first of CUDA_VISIBLE_DEVICES).
gpu_memory_mib() {
    local id=${CUDA_VISIBLE_DEVICES:-}
    id=${id%%,*}
    nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits ${id:+-i "$id"} | head -1
}

# The batches of BATCHES (comma-separated) whose decode at CONFIG's shape (bf16 weights, a KV
# cache of 1K context per sequence, as gpu_bench and tools/torch_decode_peer.py run it) fits
# in 90% of MIB less 2 GiB of workspace. Prints them comma-separated (empty when none fits).
batches_that_fit() {
    python3 - "$@" <<'PY'
import json, sys
c, mib, batches = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3].split(",")
h, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
heads = c["num_attention_heads"]
kv_heads = c.get("num_key_value_heads", heads)
hd = c.get("head_dim") or h // heads
weights = 2 * (vocab * h * (1 if c.get("tie_word_embeddings") else 2)
               + layers * (h * hd * (2 * heads + 2 * kv_heads) + 3 * h * c["intermediate_size"]))
per_seq = layers * 2 * kv_heads * hd * 2 * (1024 + 64)
print(",".join(b for b in batches if weights + int(b) * per_seq <= 0.9 * mib * 2**20 - 2**31))
PY
}

# Random weights need only a tokenizer and a chat template: this assembles a model folder from
# committed fixtures (SmolLM's tokenizer.json, SmolLM2's template, a tiny checkpoint whose
# weights are never used) so the 94 MB GGUF need not travel. Run from the repository root;
# prints the folder.
random_weights_model_dir() {
    local model
    model=$(mktemp -d)
    cp tests/fixtures/golden/llama_gqa/config.json tests/fixtures/golden/llama_gqa/model.safetensors "$model/"
    cp tests/fixtures/tokenizer/smollm_tokenizer.json "$model/tokenizer.json"
    cp tests/fixtures/templates/smollm2.jinja "$model/chat_template.jinja"
    echo "$model"
}
