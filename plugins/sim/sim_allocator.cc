// The sim device's memory: blocks from the host's heap, counted against a capacity, with the statistics a
// caching device allocator reports (allocated, reserved, peak), which AcceleratorHooks reads as it reads cuda's.
// Nothing is cached: reserved equals allocated.
#include <cctype>
#include <cstdlib>
#include <mutex>

#include <c10/util/Exception.h>

#include "plugins/sim/sim.h"

namespace tmx::sim {
namespace {

constexpr int64_t kDefaultCapacity = int64_t{8} << 30;
constexpr size_t kAlignment = 64;

using c10::CachingAllocator::StatType;
constexpr size_t kAggregate = static_cast<size_t>(StatType::AGGREGATE);

// "8.00 GiB", "1.50 MiB", "512 bytes".
std::string Size(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (1 << 20)) {
    std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(text, sizeof text, "%lld bytes", static_cast<long long>(bytes));
  }
  return text;
}

class SimAllocator final : public c10::DeviceAllocator {
 public:
  explicit SimAllocator(int64_t capacity) : capacity_(capacity) {}

  c10::DataPtr allocate(size_t n) override {
    void* data = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const int64_t used = stats_.allocated_bytes[kAggregate].current;
      if (used + static_cast<int64_t>(n) > capacity_) {
        ++stats_.num_ooms;
        TORCH_CHECK_WITH(OutOfMemoryError, false, "sim: out of memory: tried to allocate ", Size(n), " with ",
                         Size(used), " of the device's ", Size(capacity_),
                         " allocated (capacity from TM_SIM_MEMORY, default 8G); use a smaller batch or model, "
                         "or raise TM_SIM_MEMORY");
      }
      Count(n, +1);
    }
    if (n > 0) data = std::aligned_alloc(kAlignment, (n + kAlignment - 1) / kAlignment * kAlignment);
    TORCH_CHECK(n == 0 || data != nullptr, "sim: the host could not back an allocation of ", Size(n));
    auto* context = new Block{this, n, data};
    return {data, context, &Free, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* array : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.allocation}) {
      for (auto& stat : *array) stat.reset_accumulated();
    }
  }
  void resetPeakStats(c10::DeviceIndex) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* array : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.allocation}) {
      for (auto& stat : *array) stat.reset_peak();
    }
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return {static_cast<size_t>(capacity_ - stats_.allocated_bytes[kAggregate].current),
            static_cast<size_t>(capacity_)};
  }

 private:
  // A DataPtr's context: what Free needs to give the bytes back and count them.
  struct Block {
    SimAllocator* owner;
    size_t bytes;
    void* data;
  };
  static void Free(void* context) {
    auto* block = static_cast<Block*>(context);
    std::free(block->data);
    {
      std::lock_guard<std::mutex> lock(block->owner->mutex_);
      block->owner->Count(block->bytes, -1);
    }
    delete block;
  }
  void Count(size_t n, int sign) {
    for (auto* array : {&stats_.allocated_bytes, &stats_.reserved_bytes}) {
      sign > 0 ? (*array)[kAggregate].increase(n) : (*array)[kAggregate].decrease(n);
    }
    sign > 0 ? stats_.allocation[kAggregate].increase(1) : stats_.allocation[kAggregate].decrease(1);
  }

  const int64_t capacity_;
  std::mutex mutex_;
  c10::CachingDeviceAllocator::DeviceStats stats_;
};

}  // namespace

int64_t ParseBytes(const std::string& text) {
  size_t end = 0;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == 0 || end > 18) return -1;
  const int64_t number = std::stoll(text.substr(0, end));
  const std::string unit = text.substr(end);
  for (auto [names, shift] : {std::pair<const char*, int>{"|B", 0}, {"K|KB|KiB", 10}, {"M|MB|MiB", 20},
                              {"G|GB|GiB", 30}}) {
    std::string list = std::string("|") + names + "|";
    if (list.find("|" + unit + "|") != std::string::npos) return number << shift;
  }
  return -1;
}

int64_t CapacityFromEnvironment(std::string* error) {
  const char* value = std::getenv("TM_SIM_MEMORY");
  if (value == nullptr) return kDefaultCapacity;
  const int64_t bytes = ParseBytes(value);
  if (bytes <= 0) {
    *error = std::string("TM_SIM_MEMORY='") + value + "' is not a size; write bytes with an optional unit, e.g. "
             "TM_SIM_MEMORY=8G or TM_SIM_MEMORY=512MiB";
    return -1;
  }
  return bytes;
}

c10::DeviceAllocator* Allocator() {
  static SimAllocator* allocator = [] {
    std::string error;
    int64_t capacity = CapacityFromEnvironment(&error);
    TORCH_CHECK(error.empty(), "sim: ", error);
    return new SimAllocator(capacity);  // lives as long as the process: PyTorch holds it
  }();
  return allocator;
}

bool Bf16Enabled() {
  const char* value = std::getenv("TM_SIM_BF16");
  return value == nullptr || std::string(value) != "0";
}

}  // namespace tmx::sim
