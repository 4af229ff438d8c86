// SPDX-License-Identifier: Apache-2.0
// Optional libraries opened with dlopen (see shared_library.hpp).
#include "shared_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

namespace flowdsl::detail {

std::vector<std::string> library_candidates(const char* variable, std::vector<std::string> defaults) {
  if (const char* chosen = std::getenv(variable); chosen != nullptr && *chosen != '\0') return {chosen};
  return defaults;
}

SharedLibrary::SharedLibrary(const std::vector<std::string>& candidates) {
  for (const std::string& candidate : candidates) {
    dlerror();
    handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      path_ = candidate;
      return;
    }
    const char* why = dlerror();
    tried_ += "\n  " + (why != nullptr ? std::string(why) : candidate + ": cannot be opened");
  }
}

void* SharedLibrary::symbol(const char* name) const {
  return handle_ == nullptr ? nullptr : dlsym(handle_, name);
}

}  // namespace flowdsl::detail
