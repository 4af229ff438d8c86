// SPDX-License-Identifier: Apache-2.0
// Fused kernels compiled with NVRTC and kept: loaded libraries by source and architecture for the
// process, and optionally their images in a directory for other processes. NVRTC is opened with
// dlopen when the first kernel is compiled: programs that never fuse neither link nor load it.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <unistd.h>

#include "flowdsl/cuda_handles.hpp"
#include "fusion.hpp"
#include "log_internal.hpp"
#include "shared_library.hpp"

namespace flowdsl::lowering {
namespace {

using LibraryHandle = UniqueHandle<cudaLibrary_t, &cudaLibraryUnload>;

struct Loaded {
  LibraryHandle library;
  cudaKernel_t kernel = nullptr;
};

// The process's fused kernels. Libraries load into every context of the process lazily, so one
// entry serves every device of one architecture.
struct Store {
  std::mutex mutex;
  std::unordered_map<std::string, Loaded> loaded;  // by architecture, newline, source
  bool directory_read = false;
  std::string directory;
  FusedKernelStatistics statistics;
};

Store& store() {
  static Store s;
  return s;
}

constexpr std::string_view file_magic = "flowdsl fused kernel 1\n";

// FNV-1a: a file name that stays the same from one process and build to the next.
std::uint64_t stable_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string file_for(const std::string& directory, const std::string& key, const std::string& arch) {
  char name[64];
  std::snprintf(name, sizeof name, "fused-%016llx-%s.bin", static_cast<unsigned long long>(stable_hash(key)), arch.c_str());
  return (std::filesystem::path(directory) / name).string();
}

// The image stored for `key`, or empty when the file is missing or holds another kernel.
std::string read_image(const std::string& file, const std::string& key) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string header = std::string(file_magic) + std::to_string(key.size()) + "\n";
  if (bytes.size() <= header.size() + key.size() || bytes.compare(0, header.size(), header) != 0 ||
      bytes.compare(header.size(), key.size(), key) != 0) {
    return {};
  }
  return bytes.substr(header.size() + key.size());
}

void write_image(const std::string& directory, const std::string& file, const std::string& key, const std::string& image) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  const std::string temporary = file + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << file_magic << key.size() << "\n" << key << image;
    if (!out) {
      FLOWDSL_DEBUG("fusion: could not write {}", temporary);
      return;
    }
  }
  std::filesystem::rename(temporary, file, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    FLOWDSL_DEBUG("fusion: could not keep {}", file);
  }
}

// NVRTC's functions, from the library FLOWDSL_NVRTC names, else the toolkit's this build used,
// else the soname. The handle stays open for the process (kernels it compiled may still run).
struct Nvrtc {
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) arch_count = nullptr;
  decltype(&nvrtcGetSupportedArchs) archs = nullptr;
};

// Called with the store's mutex held. A failed load is tried again by the next compilation.
const Nvrtc& nvrtc(const std::string& path) {
  static Nvrtc api;
  static bool loaded = false;
  if (loaded) return api;
  const flowdsl::detail::SharedLibrary library(flowdsl::detail::library_candidates(
      "FLOWDSL_NVRTC",
      {FLOWDSL_NVRTC_LIBRARY, std::filesystem::path(FLOWDSL_NVRTC_LIBRARY).filename().string()}));
  if (!library) {
    throw CudaError(cudaErrorSharedObjectInitFailed, "dlopen", path,
                    "NVRTC, which compiles fused kernels, cannot be loaded (set FLOWDSL_NVRTC to its path, or leave "
                    "the graph unfused); tried:" + library.tried());
  }
  Nvrtc found;
  std::string missing;
  library.resolve("nvrtcGetErrorString", found.error_string, missing);
  library.resolve("nvrtcCreateProgram", found.create, missing);
  library.resolve("nvrtcDestroyProgram", found.destroy, missing);
  library.resolve("nvrtcCompileProgram", found.compile, missing);
  library.resolve("nvrtcGetProgramLogSize", found.log_size, missing);
  library.resolve("nvrtcGetProgramLog", found.log, missing);
  library.resolve("nvrtcGetCUBINSize", found.cubin_size, missing);
  library.resolve("nvrtcGetCUBIN", found.cubin, missing);
  library.resolve("nvrtcGetPTXSize", found.ptx_size, missing);
  library.resolve("nvrtcGetPTX", found.ptx, missing);
  library.resolve("nvrtcGetNumSupportedArchs", found.arch_count, missing);
  library.resolve("nvrtcGetSupportedArchs", found.archs, missing);
  if (!missing.empty()) {
    throw CudaError(cudaErrorSharedObjectSymbolNotFound, "dlsym", path,
                    library.path() + ", the NVRTC library loaded, lacks " + missing);
  }
  api = found;
  loaded = true;
  return api;
}

struct Program {
  const Nvrtc& api;
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle != nullptr) api.destroy(&handle);
  }
};

void check_nvrtc(const Nvrtc& api, nvrtcResult result, const char* call, const std::string& path,
                 const std::string& log = {}) {
  if (result == NVRTC_SUCCESS) return;
  throw CudaError(cudaErrorInvalidSource, call, path,
                  std::string(api.error_string(result)) + (log.empty() ? std::string() : ":\n" + log));
}

// The target for `major`.`minor`: a cubin for it when NVRTC knows it, else PTX of the newest
// architecture it knows below, for the driver to compile.
std::pair<std::string, bool> target_for(const Nvrtc& api, int major, int minor) {
  int count = 0;
  std::vector<int> archs;
  if (api.arch_count(&count) == NVRTC_SUCCESS && count > 0) {
    archs.resize(static_cast<std::size_t>(count));
    if (api.archs(archs.data()) != NVRTC_SUCCESS) archs.clear();
  }
  const int wanted = major * 10 + minor;
  int best = 0;
  for (int a : archs) {
    if (a == wanted) return {"sm_" + std::to_string(wanted), true};
    if (a < wanted && a > best) best = a;
  }
  return {"compute_" + std::to_string(best == 0 ? wanted : best), false};
}

std::string compile(const Nvrtc& api, const std::string& source, const std::string& arch, bool cubin,
                    const std::string& path) {
  Program program{api};
  check_nvrtc(api, api.create(&program.handle, source.c_str(), "flowdsl_fused.cu", 0, nullptr, nullptr),
              "nvrtcCreateProgram", path);
  const std::string target = "--gpu-architecture=" + arch;
  // No contraction the separate kernels would not make: their fmas are written out. -minimal
  // (NVRTC 12.4+) leaves out the runtime API's declarations, which a fused kernel never uses:
  // about half the compile time of a warm NVRTC (8-11 ms instead of 16-20 on the H200's host).
  const char* options[] = {target.c_str(), "--fmad=false", "--std=c++17", "-minimal"};
  nvrtcResult result = api.compile(program.handle, 4, options);
  if (result == NVRTC_ERROR_INVALID_OPTION) {  // an older NVRTC: a fresh program, without -minimal
    api.destroy(&program.handle);
    check_nvrtc(api, api.create(&program.handle, source.c_str(), "flowdsl_fused.cu", 0, nullptr, nullptr),
                "nvrtcCreateProgram", path);
    result = api.compile(program.handle, 3, options);
  }
  if (result != NVRTC_SUCCESS) {
    std::size_t size = 0;
    std::string log;
    if (api.log_size(program.handle, &size) == NVRTC_SUCCESS && size > 1) {
      log.resize(size);
      if (api.log(program.handle, log.data()) != NVRTC_SUCCESS) log.clear();
    }
    check_nvrtc(api, result, "nvrtcCompileProgram", path, log);
  }
  std::size_t size = 0;
  std::string image;
  if (cubin) {
    check_nvrtc(api, api.cubin_size(program.handle, &size), "nvrtcGetCUBINSize", path);
    image.resize(size);
    check_nvrtc(api, api.cubin(program.handle, image.data()), "nvrtcGetCUBIN", path);
  } else {
    check_nvrtc(api, api.ptx_size(program.handle, &size), "nvrtcGetPTXSize", path);
    image.resize(size);
    check_nvrtc(api, api.ptx(program.handle, image.data()), "nvrtcGetPTX", path);
  }
  return image;
}

Loaded load(const std::string& image, const std::string& path) {
  Loaded out;
  cudaLibrary_t library = nullptr;
  check(cudaLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData",
        path.c_str());
  out.library.reset(library);
  check(cudaLibraryGetKernel(&out.kernel, library, "flowdsl_fused"), "cudaLibraryGetKernel", path.c_str());
  return out;
}

}  // namespace

const void* fused_kernel(const std::string& source, int device, const std::string& path) {
  int major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute", path.c_str());
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute", path.c_str());
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mutex);  // one compilation of each kernel, even from several threads
  const Nvrtc& api = nvrtc(path);
  const auto [arch, cubin] = target_for(api, major, minor);
  std::string key = arch + "\n" + source;

  if (const auto it = s.loaded.find(key); it != s.loaded.end()) {
    ++s.statistics.memory_hits;
    return it->second.kernel;
  }
  if (!s.directory_read) {
    s.directory_read = true;
    if (const char* env = std::getenv("FLOWDSL_FUSION_CACHE"); env != nullptr && s.directory.empty()) s.directory = env;
  }
  std::string file;
  if (!s.directory.empty()) {
    file = file_for(s.directory, key, arch);
    const std::string image = read_image(file, key);
    if (!image.empty()) {
      Loaded loaded = load(image, path);
      ++s.statistics.disk_hits;
      FLOWDSL_DEBUG("fusion: {} loaded from {}", path, file);
      return s.loaded.emplace(std::move(key), std::move(loaded)).first->second.kernel;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string image = compile(api, source, arch, cubin, path);
  Loaded loaded = load(image, path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++s.statistics.compilations;
  s.statistics.compile_seconds += seconds;
  s.statistics.last_compile_seconds = seconds;
  FLOWDSL_DEBUG("fusion: compiled the kernel of {} for {} in {:.1f} ms", path, arch, seconds * 1e3);
  if (!file.empty()) write_image(s.directory, file, key, image);
  return s.loaded.emplace(std::move(key), std::move(loaded)).first->second.kernel;
}

// NVRTC's start-up, run once on a thread of its own (prepare_fused_kernel_compiler); joined when
// the process ends. Made after the store, so destroyed (joined) before it.
struct WarmUp {
  std::once_flag once;
  std::mutex mutex;  // join() from the exit handler and the destructor alike
  std::thread thread;
  void join() {
    std::lock_guard<std::mutex> lock(mutex);
    if (thread.joinable()) thread.join();
  }
  ~WarmUp() { join(); }
};

WarmUp& warm_up_state() {
  static WarmUp w;
  return w;
}

// The first compilation, on the warm-up thread, with NVRTC already loaded by the caller.
void warm_up(const Nvrtc* api) {
  try {
    int count = 0;
    std::vector<int> archs;
    if (api->arch_count(&count) == NVRTC_SUCCESS && count > 0) {
      archs.resize(static_cast<std::size_t>(count));
      if (api->archs(archs.data()) != NVRTC_SUCCESS) archs.clear();
    }
    if (archs.empty()) return;
    // PTX of the oldest architecture NVRTC knows: no device needed, and the start-up is the same.
    const auto start = std::chrono::steady_clock::now();
    (void)compile(*api, "extern \"C\" __global__ void flowdsl_start_up(float* x) { x[threadIdx.x] = 0.0f; }\n",
                  "compute_" + std::to_string(archs.front()), false, "NVRTC start-up");
    FLOWDSL_DEBUG("fusion: NVRTC started in {:.1f} ms",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  } catch (const std::exception& e) {
    FLOWDSL_DEBUG("fusion: NVRTC start-up failed: {}", e.what());
  }
}

}  // namespace flowdsl::lowering

namespace flowdsl {

void prepare_fused_kernel_compiler() {
  lowering::Store& s = lowering::store();
  lowering::WarmUp& w = lowering::warm_up_state();
  std::call_once(w.once, [&] {
    // NVRTC is loaded here, then the thread's join is registered to run at exit: exit handlers
    // run in reverse order, so a process that ends while the thread still compiles waits for it
    // before NVRTC's own exit handlers (registered when it was loaded) tear NVRTC down.
    const lowering::Nvrtc* api = nullptr;
    try {
      std::lock_guard<std::mutex> lock(s.mutex);
      api = &lowering::nvrtc("NVRTC start-up");
    } catch (const std::exception& e) {
      FLOWDSL_DEBUG("fusion: NVRTC start-up failed: {}", e.what());
      return;
    }
    (void)detail::log();  // the logger the thread logs through outlives the join, too
    std::atexit([] { lowering::warm_up_state().join(); });
    w.thread = std::thread(lowering::warm_up, api);
  });
}

void wait_for_fused_kernel_compiler() { lowering::warm_up_state().join(); }

FusedKernelStatistics fused_kernel_statistics() {
  lowering::Store& s = lowering::store();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.statistics;
}

void set_fused_kernel_directory(std::string directory) {
  lowering::Store& s = lowering::store();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.directory = std::move(directory);
  s.directory_read = true;
}

}  // namespace flowdsl
