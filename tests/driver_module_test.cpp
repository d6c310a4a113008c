// LoadedKernel against a fake driver (the call sequence of a load and an unload, failures, and the
// driver gone at exit), and ModuleTable's single flight with an injected loader (no driver).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver/module.hpp"
#include "driver_test_util.hpp"

namespace flashjit {
namespace {

// ---- a fake driver that logs the calls LoadedKernel makes ----

struct FakeModuleDriver {
  static inline std::mutex mutex;
  static inline std::vector<std::string> log;
  static inline CUresult push_answer = CUDA_SUCCESS;
  static inline CUresult get_function_answer = CUDA_SUCCESS;
  static inline int modules = 0;

  static void reset() {
    std::lock_guard<std::mutex> lock(mutex);
    log.clear();
    push_answer = CUDA_SUCCESS;
    get_function_answer = CUDA_SUCCESS;
  }
  static void note(std::string line) {
    std::lock_guard<std::mutex> lock(mutex);
    log.push_back(std::move(line));
  }
  static std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mutex);
    return log;
  }
  static std::string ptr(const void* p) { return std::to_string(reinterpret_cast<std::uintptr_t>(p)); }

  static CUresult push(CUcontext ctx) {
    note("push " + ptr(ctx));
    return push_answer;
  }
  static CUresult pop(CUcontext* ctx) {
    note("pop");
    *ctx = nullptr;
    return CUDA_SUCCESS;
  }
  static CUresult load_data(CUmodule* module, const void* image) {
    note(std::string("load ") + static_cast<const char*>(image));
    std::lock_guard<std::mutex> lock(mutex);
    *module = reinterpret_cast<CUmodule>(std::uintptr_t(0x1000 + 16 * ++modules));
    return CUDA_SUCCESS;
  }
  static CUresult unload(CUmodule module) {
    note("unload " + ptr(module));
    return CUDA_SUCCESS;
  }
  static CUresult get_function(CUfunction* function, CUmodule, const char* name) {
    note(std::string("get_function ") + name);
    *function = reinterpret_cast<CUfunction>(std::uintptr_t(0x2000));
    return get_function_answer;
  }
  static CUresult set_attribute(CUfunction, CUfunction_attribute attribute, int value) {
    note((attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES      ? "set max_dynamic_smem "
          : attribute == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT ? "set carveout "
                                                                            : "set other ") +
         std::to_string(value));
    return CUDA_SUCCESS;
  }
  static CUresult get_attribute(int* value, CUfunction_attribute attribute, CUfunction) {
    if (attribute == CU_FUNC_ATTRIBUTE_NUM_REGS) {
      note("get num_regs");
      *value = 42;
    } else if (attribute == CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES) {
      note("get local_size");
      *value = 16;
    } else {
      note("get other");
      *value = -1;
    }
    return CUDA_SUCCESS;
  }
  static CUresult error_name(CUresult, const char** name) {
    *name = "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
  }
};

DriverApi fake_module_driver() {
  DriverApi api;
  api.cuCtxPushCurrent = &FakeModuleDriver::push;
  api.cuCtxPopCurrent = &FakeModuleDriver::pop;
  api.cuModuleLoadData = &FakeModuleDriver::load_data;
  api.cuModuleUnload = &FakeModuleDriver::unload;
  api.cuModuleGetFunction = &FakeModuleDriver::get_function;
  api.cuFuncSetAttribute = &FakeModuleDriver::set_attribute;
  api.cuFuncGetAttribute = &FakeModuleDriver::get_attribute;
  api.cuGetErrorName = &FakeModuleDriver::error_name;
  return api;
}

CUcontext fake_context(int i) { return reinterpret_cast<CUcontext>(std::uintptr_t(0x100 * i)); }

const std::string kCubin("CUBIN", 6);  // NUL-terminated, so the fake can log it

TEST(LoadedKernel, LoadsInItsContextSetsSmemOnceAndUnloadsThere) {
  FakeModuleDriver::reset();
  const DriverApi api = fake_module_driver();
  auto kernel = LoadedKernel::load(api, fake_context(1), kCubin, "fill", 200000);
  ASSERT_TRUE(kernel.ok()) << kernel.error().message;
  const std::string ctx = FakeModuleDriver::ptr(fake_context(1));
  EXPECT_EQ(FakeModuleDriver::calls(),
            (std::vector<std::string>{"push " + ctx, "load CUBIN", "get_function fill", "set max_dynamic_smem 200000",
                                      "get num_regs", "get local_size", "pop"}));
  EXPECT_EQ((*kernel)->name(), "fill");
  EXPECT_EQ((*kernel)->context(), fake_context(1));
  EXPECT_EQ((*kernel)->function(), reinterpret_cast<CUfunction>(std::uintptr_t(0x2000)));
  EXPECT_EQ((*kernel)->dynamic_smem_bytes(), 200000);
  EXPECT_EQ((*kernel)->num_regs(), 42);
  EXPECT_EQ((*kernel)->local_size_bytes(), 16);

  const std::string module = FakeModuleDriver::ptr((*kernel)->module());
  FakeModuleDriver::reset();
  kernel = Error::make(ErrorCode::kInternal, "dropped");  // destroys the kernel
  EXPECT_EQ(FakeModuleDriver::calls(), (std::vector<std::string>{"push " + ctx, "unload " + module, "pop"}));
}

// Kernels of two CTAs an SM ask for the largest shared-memory carveout, once, at load; the others
// (above) leave the driver's choice.
TEST(LoadedKernel, TwoCtasAnSmKernelsAskForTheMaxSharedCarveout) {
  FakeModuleDriver::reset();
  const DriverApi api = fake_module_driver();
  auto kernel = LoadedKernel::load(api, fake_context(1), kCubin, "fill", 99000, {}, true);
  ASSERT_TRUE(kernel.ok()) << kernel.error().message;
  const std::string ctx = FakeModuleDriver::ptr(fake_context(1));
  EXPECT_EQ(FakeModuleDriver::calls(),
            (std::vector<std::string>{"push " + ctx, "load CUBIN", "get_function fill", "set max_dynamic_smem 99000",
                                      "set carveout 100", "get num_regs", "get local_size", "pop"}));
}

TEST(LoadedKernel, FailedLookupUnloadsTheModuleAndPopsTheContext) {
  FakeModuleDriver::reset();
  FakeModuleDriver::get_function_answer = CUDA_ERROR_NOT_FOUND;
  auto kernel = LoadedKernel::load(fake_module_driver(), fake_context(2), kCubin, "missing_kernel", 0);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.error().code, ErrorCode::kDriverError);
  EXPECT_NE(kernel.error().message.find("cuModuleGetFunction(missing_kernel): CUDA_ERROR_FAKE"), std::string::npos)
      << kernel.error().message;
  const auto calls = FakeModuleDriver::calls();
  int depth = 0, unloads = 0;
  for (const std::string& c : calls) {
    depth += c.rfind("push", 0) == 0 ? 1 : c == "pop" ? -1 : 0;
    unloads += c.rfind("unload", 0) == 0;
  }
  EXPECT_EQ(depth, 0) << "every push is popped";
  EXPECT_EQ(unloads, 1) << "the module is not leaked";
  EXPECT_EQ(calls.back(), "pop");
}

TEST(LoadedKernel, BadInputsNeverReachTheDriver) {
  FakeModuleDriver::reset();
  const DriverApi api = fake_module_driver();
  auto empty = LoadedKernel::load(api, fake_context(1), "", "fill", 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(empty.error().field, "cubin");
  auto negative = LoadedKernel::load(api, fake_context(1), kCubin, "fill", -1);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().field, "dynamic_smem_bytes");
  auto unnamed = LoadedKernel::load(api, fake_context(1), kCubin, "", 0);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.error().field, "kernel_name");
  EXPECT_TRUE(FakeModuleDriver::calls().empty());
}

TEST(LoadedKernel, ContextThatCannotBeEnteredIsAnError) {
  FakeModuleDriver::reset();
  FakeModuleDriver::push_answer = CUDA_ERROR_INVALID_CONTEXT;
  auto kernel = LoadedKernel::load(fake_module_driver(), fake_context(3), kCubin, "fill", 0);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.error().code, ErrorCode::kDriverError);
  EXPECT_NE(kernel.error().message.find("cuCtxPushCurrent"), std::string::npos) << kernel.error().message;
  EXPECT_EQ(FakeModuleDriver::calls().size(), 1u) << "nothing after the failed push";
}

// NOTES: in a child process, because it marks the driver shut down for the rest of the process.
int deinitialized_role(int, char**) {
  FakeModuleDriver::reset();
  const DriverApi api = fake_module_driver();
  auto first = LoadedKernel::load(api, fake_context(1), kCubin, "a", 0);
  auto second = LoadedKernel::load(api, fake_context(1), kCubin, "b", 0);
  if (!first.ok() || !second.ok()) return 2;
  FakeModuleDriver::reset();
  FakeModuleDriver::push_answer = CUDA_ERROR_DEINITIALIZED;
  first = Error::make(ErrorCode::kInternal, "dropped");
  const auto after_first = FakeModuleDriver::calls();
  if (after_first.size() != 1 || after_first[0].rfind("push", 0) != 0) return 3;  // push, then nothing
  if (!driver_shut_down()) return 4;
  second = Error::make(ErrorCode::kInternal, "dropped");
  if (FakeModuleDriver::calls().size() != 1) return 5;  // no call at all once the driver is gone
  std::printf("deinitialized: ok\n");
  return 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(driver_deinitialized, deinitialized_role);

TEST(LoadedKernel, DriverGoneAtExitMeansNoMoreCalls) {
  auto run = testing::run_child_role("driver_deinitialized", {});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("deinitialized: ok"), std::string::npos) << run.output;
}

// ---- ModuleTable with an injected loader ----

std::shared_ptr<LoadedKernel> fake_kernel(CUcontext context, const std::string& name) {
  LoadedKernel::Parts parts;
  parts.context = context;
  parts.name = name;
  return std::make_shared<LoadedKernel>(nullptr, std::move(parts));  // no driver: nothing to unload
}

// Runs fn(i) on n threads released together.
template <class Fn>
void on_threads(int n, Fn fn) {
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      fn(i);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(ModuleTable, SixteenThreadsSameKeyLoadOnce) {
  ModuleTable table;
  std::atomic<int> loads{0};
  std::vector<std::shared_ptr<LoadedKernel>> got(16);
  on_threads(16, [&](int i) {
    auto k = table.get_or_load(fake_context(1), "dtype=bf16,head_dim=128", [&](CUcontext ctx) -> KernelResult {
      loads++;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return fake_kernel(ctx, "fa_fwd");
    });
    if (k.ok()) got[i] = *k;
  });
  EXPECT_EQ(loads.load(), 1);
  for (int i = 0; i < 16; ++i) {
    ASSERT_NE(got[i], nullptr) << i;
    EXPECT_EQ(got[i], got[0]) << i;
  }
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.find(fake_context(1), "dtype=bf16,head_dim=128"), got[0]);
}

TEST(ModuleTable, EachContextGetsItsOwnLoad) {
  ModuleTable table;
  std::atomic<int> loads{0};
  std::vector<std::shared_ptr<LoadedKernel>> got(16);
  on_threads(16, [&](int i) {
    auto k = table.get_or_load(fake_context(1 + i % 2), "same key", [&](CUcontext ctx) -> KernelResult {
      loads++;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return fake_kernel(ctx, "fa_fwd");
    });
    if (k.ok()) got[i] = *k;
  });
  EXPECT_EQ(loads.load(), 2);
  for (int i = 0; i < 16; ++i) {
    ASSERT_NE(got[i], nullptr);
    EXPECT_EQ(got[i]->context(), fake_context(1 + i % 2)) << "loaded in the context it was asked for";
    EXPECT_EQ(got[i], got[i % 2]);
  }
  EXPECT_NE(got[0], got[1]);
  EXPECT_EQ(table.size(), 2u);
}

TEST(ModuleTable, DifferentKeysLoadAtTheSameTime) {
  // Each loader waits until the other one has started: if loads were serialised, the first would
  // time out and fail.
  ModuleTable table;
  std::mutex mutex;
  std::condition_variable changed;
  int started = 0;
  std::vector<KernelResult> results(2, Error::make(ErrorCode::kInternal, "not run"));
  on_threads(2, [&](int i) {
    results[i] = table.get_or_load(fake_context(1), "key" + std::to_string(i), [&](CUcontext ctx) -> KernelResult {
      std::unique_lock<std::mutex> lock(mutex);
      ++started;
      changed.notify_all();
      if (!changed.wait_for(lock, std::chrono::seconds(10), [&] { return started == 2; })) {
        return Error::make(ErrorCode::kInternal, "the other load never started while this one ran");
      }
      return fake_kernel(ctx, "k");
    });
  });
  for (auto& r : results) EXPECT_TRUE(r.ok()) << r.error().message;
}

TEST(ModuleTable, FailureReachesEveryWaiterAndIsNotKept) {
  ModuleTable table;
  std::atomic<int> loads{0};
  std::vector<KernelResult> results(8, fake_kernel(nullptr, "unset"));
  on_threads(8, [&](int i) {
    results[i] = table.get_or_load(fake_context(1), "bad", [&](CUcontext) -> KernelResult {
      loads++;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return Error::make(ErrorCode::kDriverError, "cuModuleLoadData(bad): CUDA_ERROR_INVALID_IMAGE");
    });
  });
  EXPECT_EQ(loads.load(), 1);
  for (auto& r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kDriverError);
  }
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.find(fake_context(1), "bad"), nullptr);
  auto retry = table.get_or_load(fake_context(1), "bad", [&](CUcontext ctx) -> KernelResult {
    loads++;
    return fake_kernel(ctx, "good now");
  });
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(loads.load(), 2);
}

TEST(ModuleTable, ThrowingLoaderDoesNotStrandWaiters) {
  ModuleTable table;
  std::vector<KernelResult> results(4, fake_kernel(nullptr, "unset"));
  on_threads(4, [&](int i) {
    results[i] = table.get_or_load(fake_context(1), "throws", [&](CUcontext) -> KernelResult {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      throw std::runtime_error("boom");
    });
  });
  for (auto& r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("boom"), std::string::npos) << r.error().message;
  }
}

TEST(ModuleTable, DropContextForgetsOnlyThatContext) {
  ModuleTable table;
  auto load = [](CUcontext ctx) -> KernelResult { return fake_kernel(ctx, "k"); };
  for (int c = 1; c <= 3; ++c) {
    for (const char* key : {"a", "b"}) ASSERT_TRUE(table.get_or_load(fake_context(c), key, load).ok());
  }
  EXPECT_EQ(table.size(), 6u);
  EXPECT_EQ(table.drop_context(fake_context(2)), 2u);
  EXPECT_EQ(table.size(), 4u);
  EXPECT_EQ(table.find(fake_context(2), "a"), nullptr);
  EXPECT_NE(table.find(fake_context(1), "a"), nullptr);
  EXPECT_NE(table.find(fake_context(3), "b"), nullptr);
  EXPECT_EQ(table.drop_context(fake_context(2)), 0u);
}

TEST(ModuleTable, RealLoaderUnderConcurrencyLoadsTheModuleOnce) {
  FakeModuleDriver::reset();
  const DriverApi api = fake_module_driver();
  ModuleTable table;
  std::vector<std::shared_ptr<LoadedKernel>> got(16);
  on_threads(16, [&](int i) {
    auto k = table.get_or_load(api, fake_context(i % 2 + 1), "spec", kCubin, "fa_fwd", 1024);
    if (k.ok()) got[i] = *k;
  });
  int loads = 0, smem_sets = 0;
  for (const std::string& c : FakeModuleDriver::calls()) {
    loads += c.rfind("load ", 0) == 0;
    smem_sets += c.rfind("set max_dynamic_smem", 0) == 0;
  }
  EXPECT_EQ(loads, 2) << "one module per context";
  EXPECT_EQ(smem_sets, 2) << "the attribute is set once per load";
  for (int i = 0; i < 16; ++i) {
    ASSERT_NE(got[i], nullptr);
    EXPECT_EQ(got[i], got[i % 2]);
  }
}

}  // namespace
}  // namespace flashjit
