#include "common/log.hpp"

#include <cstdlib>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace flashjit {

spdlog::logger& logger() {
  // NOTES: a function-local static, so the level is read once, thread-safely, on first use.
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto log = std::make_shared<spdlog::logger>("flashjit", sink);
    log->set_pattern("[flashjit %l] %v");
    const char* level = std::getenv("FLASHJIT_LOG_LEVEL");
    log->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    return log;
  }();
  return *instance;
}

}  // namespace flashjit
