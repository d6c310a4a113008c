// The library's one logger ("flashjit"), level from FLASHJIT_LOG_LEVEL (trace..off; default warn).
#pragma once
#include <spdlog/spdlog.h>

namespace flashjit {
spdlog::logger& logger();
}  // namespace flashjit
