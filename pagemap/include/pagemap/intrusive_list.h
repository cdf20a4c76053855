// A doubly linked list threaded through its elements (no allocation), used for free lists,
// the dirty-run list and the list of chunks.
#pragma once

namespace pagemalloc {

template <class T, T* T::*Prev, T* T::*Next>
class IntrusiveList {
 public:
  [[nodiscard]] T* front() const { return head_; }
  [[nodiscard]] bool empty() const { return head_ == nullptr; }

  void push_front(T* x) {
    x->*Prev = nullptr;
    x->*Next = head_;
    if (head_ != nullptr) head_->*Prev = x;
    else tail_ = x;
    head_ = x;
  }
  void push_back(T* x) {
    x->*Next = nullptr;
    x->*Prev = tail_;
    if (tail_ != nullptr) tail_->*Next = x;
    else head_ = x;
    tail_ = x;
  }
  void remove(T* x) {
    if (x->*Prev != nullptr) (x->*Prev)->*Next = x->*Next;
    else head_ = x->*Next;
    if (x->*Next != nullptr) (x->*Next)->*Prev = x->*Prev;
    else tail_ = x->*Prev;
  }
  // Puts `now` where `was` stands (same neighbours), `was` leaves the list.
  void replace(T* was, T* now) {
    now->*Prev = was->*Prev;
    now->*Next = was->*Next;
    if (now->*Prev != nullptr) (now->*Prev)->*Next = now;
    else head_ = now;
    if (now->*Next != nullptr) (now->*Next)->*Prev = now;
    else tail_ = now;
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
};

}  // namespace pagemalloc
