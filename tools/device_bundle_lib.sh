# Shared by the tools/device_*.sh scripts: which libraries a bundle leaves to the GPU machine,
# copying the rest, packing bundles for a call, where that machine keeps its CUDA libraries, the library path and the
# machine report of a run there, and a model folder for random weights. Functions only; source
# it after defining die().

# Libraries the GPU machine provides itself: glibc's family, the driver and CUDA's libraries.
is_system_lib() {
    case "$1" in
        linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libdl.so* | libpthread.so* | \
            librt.so* | libresolv.so* | libutil.so*) return 0 ;;
        libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | libnvidia*.so* | \
            libnvrtc*.so* | libnvJitLink*.so*) return 0 ;;
    esac
    return 1
}

# Copies the non-system shared libraries EXE needs into LIB_DIR (once per name). ldd resolves
# the whole dependency tree, so indirect needs (libgfortran) come too.
bundle_libs() {
    local exe=$1 lib_dir=$2 lib path
    while read -r lib path; do
        is_system_lib "$lib" && continue
        [[ -f $path ]] || die "$exe needs $lib, which does not resolve here"
        [[ -f $lib_dir/$lib ]] || cp -L "$path" "$lib_dir/$lib"
    done < <(ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
}

# Copies EXE to DEST (a file path), stripped, and the non-system libraries it needs into LIB_DIR.
bundle_exe() {
    local exe=$1 dest=$2 lib_dir=$3
    cp "$exe" "$dest"
    strip --strip-unneeded "$dest" 2>/dev/null || true
    bundle_libs "$exe" "$lib_dir"
}

# Packs the bundle folders DIR... (siblings under one parent) into PACK, an .tar.xz of their
# names, so a device call carries one file well under its 64 MiB.
pack_bundles() {
    local pack=$1 parent
    shift
    parent=$(dirname "$1")
    mkdir -p "$(dirname "$pack")"
    local -a names=()
    local dir
    for dir in "$@"; do names+=("$(basename "$dir")"); done
    tar -C "$parent" -cf - "${names[@]}" | xz -T0 -6 >"$pack"
    ls -l "$pack"
}

# Unpacks PACK (from pack_bundles) into PARENT.
unpack_bundles() {
    local pack=$1 parent=$2
    mkdir -p "$parent"
    tar -C "$parent" -xJf "$pack"
}

# Directories on the GPU machine that may hold the CUDA 13 runtime and cuBLASLt; PyTorch's
# wheels carry the same libraries when the toolkit's are missing.
cuda_lib_dirs() {
    local d
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib \
        /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
        /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib \
        /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib \
        /usr/local/lib/python3*/dist-packages/nvidia/*/lib; do
        [[ -e $d/libcublasLt.so.13 || -e $d/libcudart.so.13 ]] && echo "$d"
    done
    return 0
}

# The directories of cuda_lib_dirs as one search path, each once.
cuda_lib_path() {
    cuda_lib_dirs | awk '!seen[$0]++' | paste -sd: -
}

# On the GPU machine: links into LINKS the libraries of BUNDLE_DIR/lib that the executables
# cannot find with CUDA_PATH, so the machine's own libraries win and only what it lacks comes
# from the bundle. Linking a library in can surface its own missing needs (libgfortran for
# OpenBLAS), so those are linked in a second pass.
link_missing_libs() {
    local bundle_dir=$1 links=$2 cuda_path=$3 exe lib dep
    shift 3
    mkdir -p "$links"
    for exe in "$@"; do
        while read -r lib; do
            [[ -f $bundle_dir/lib/$lib ]] && ln -sf "$bundle_dir/lib/$lib" "$links/$lib"
        done < <(LD_LIBRARY_PATH=$cuda_path ldd "$exe" | awk '/not found/ {print $1}')
    done
    for lib in "$links"/*; do
        [[ -e $lib ]] || continue
        while read -r dep; do
            [[ -f $bundle_dir/lib/$dep ]] && ln -sf "$bundle_dir/lib/$dep" "$links/$dep"
        done < <(LD_LIBRARY_PATH=$links:$cuda_path ldd "$lib" | awk '/not found/ {print $1}')
    done
    return 0
}

# On the GPU machine: the library path to run BUNDLE_DIR's executables EXE... with: LINKS (the
# caller's folder, filled with the bundled libraries the machine lacks by link_missing_libs),
# then the machine's CUDA library directories, then the caller's LD_LIBRARY_PATH. Prints it.
bundle_library_path() {
    local links=$1 bundle_dir=$2 cuda_path
    shift 2
    cuda_path=$(cuda_lib_path)
    link_missing_libs "$bundle_dir" "$links" "$cuda_path" "$@" >/dev/null
    echo "$links${cuda_path:+:$cuda_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# For a run's env log: date, host, GPU, the machine's CUDA library directories and the bundled
# libraries in LINKS (as bundle_library_path filled it).
machine_report() {
    local links=$1 cuda_path
    cuda_path=$(cuda_lib_path)
    echo "date: $(date -u)"
    echo "host: $(uname -a)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
    echo "cuda lib dirs: ${cuda_path:-<none found>}"
    echo "bundled libs used: $(ls "$links" | paste -sd' ' -)"
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
    cp tests/fixtures/tokenizer/chat_templates/smollm2.jinja "$model/chat_template.jinja"
    echo "$model"
}
