// InlineVector: a vector of trivially copyable elements that keeps its first N in place.
//
// A Plan of HM AllReduce on 1,024 GPUs has 12.8 million slots; with a std::vector for the
// dependencies and another for the tasks of each, two heap blocks per slot made up most of
// the plan's memory and of the time to build it. Almost every slot has a handful of each, so
// they live inside the slot; longer lists spill to the heap. The interface is the part of
// std::vector the code uses (iteration, size, indexing, push_back, assign, comparison,
// conversion to and from std::vector), so that Slot::deps and Slot::tasks read as before.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace weft {

template <typename T, uint32_t N>
class InlineVector {
  static_assert(std::is_trivially_copyable_v<T>, "InlineVector holds trivially copyable elements");
  static_assert(N >= 1, "InlineVector keeps at least one element in place");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using size_type = size_t;

  InlineVector() = default;
  InlineVector(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  InlineVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: converts like a vector
  template <typename It>
  InlineVector(It first, It last) {
    assign(first, last);
  }
  InlineVector(const InlineVector& o) { assign(o.begin(), o.end()); }
  InlineVector(InlineVector&& o) noexcept { take(o); }
  ~InlineVector() { release(); }

  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  InlineVector& operator=(const std::vector<T>& v) {
    assign(v.begin(), v.end());
    return *this;
  }
  InlineVector& operator=(std::initializer_list<T> init) {
    assign(init.begin(), init.end());
    return *this;
  }
  /// A copy as a std::vector.
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT

  T* data() { return cap_ > N ? heap_ : reinterpret_cast<T*>(inline_); }
  const T* data() const { return cap_ > N ? heap_ : reinterpret_cast<const T*>(inline_); }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n <= cap_) return;
    if (n > UINT32_MAX) throw std::bad_alloc();
    T* fresh = static_cast<T*>(::operator new(n * sizeof(T)));
    if (size_ > 0) std::memcpy(static_cast<void*>(fresh), data(), size_ * sizeof(T));
    release();
    heap_ = fresh;
    cap_ = static_cast<uint32_t>(n);
  }
  void push_back(const T& v) {
    if (size_ == cap_) {
      T copy = v;  // v may live in this vector
      reserve(std::max<size_t>(2 * static_cast<size_t>(cap_), 4));
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = v;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T{std::forward<Args>(args)...});
    return back();
  }
  void pop_back() { --size_; }
  template <typename It>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(std::distance(first, last));
    if (n > cap_) {
      // The source may be this vector's own storage: build the new block first.
      T* fresh = static_cast<T*>(::operator new(n * sizeof(T)));
      std::copy(first, last, fresh);
      release();
      heap_ = fresh;
      cap_ = static_cast<uint32_t>(n);
    } else {
      std::copy(first, last, data());
    }
    size_ = static_cast<uint32_t>(n);
  }

  friend bool operator==(const InlineVector& a, const InlineVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  void release() {
    if (cap_ > N) ::operator delete(heap_);
    cap_ = N;
  }
  void take(InlineVector& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.cap_ > N) heap_ = o.heap_;
    else if (o.size_ > 0) std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
    o.size_ = 0;
    o.cap_ = N;
  }

  // Raw bytes rather than T[N]: T may have default member initializers, which a union member
  // may not; trivially copyable T is only ever copied in and out.
  union {
    alignas(T) unsigned char inline_[N * sizeof(T)];
    T* heap_;
  };
  uint32_t size_ = 0;
  uint32_t cap_ = N;
};

}  // namespace weft
