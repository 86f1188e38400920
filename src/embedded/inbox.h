// inbox.h — the timer thread's inbox: Dmitry Vyukov's intrusive multi-producer, single-consumer
// queue. push() is one atomic exchange and one store from any thread, never waiting, and
// allocates nothing (the link lives in the node, a TaskRecord or the shutdown marker); pop() and
// empty() are the consumer's (the timer thread's) alone. A push is caught between its two steps
// for a few instructions (the list is briefly unlinked there); pop() yields until it is done, so
// a producer preempted right there delays the consumer until it runs again.
// Why it holds records rather than commands: docs/embedded.md, "How it works".
#pragma once

#include <atomic>
#include <thread>

#include "delayq/scheduler.h"

namespace delayq::detail {

class Inbox {
 public:
  Inbox() = default;
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // The exchange is sequentially consistent: a caller that pushes and then reads the timer
  // thread's sleeping_until_, and a timer thread that writes it and then checks empty(), cannot
  // both miss each other.
  void push(InboxNode* node) noexcept {
    node->next_.store(nullptr, std::memory_order_relaxed);
    InboxNode* prev = tail_.exchange(node, std::memory_order_seq_cst);
    prev->next_.store(node, std::memory_order_release);
  }

  // Consumer only. The oldest node, or nullptr if there is none.
  InboxNode* pop() noexcept {
    for (;;) {
      InboxNode* head = head_;
      InboxNode* next = head->next_.load(std::memory_order_acquire);
      if (head == &stub_) {
        if (next == nullptr) {
          if (tail_.load(std::memory_order_seq_cst) == &stub_) return nullptr;
          std::this_thread::yield();  // a push between its exchange and its link
          continue;
        }
        head_ = next;
        head = next;
        next = next->next_.load(std::memory_order_acquire);
      }
      if (next == nullptr) {
        // `head` is the last node: put the stub behind it so that it can be taken out.
        if (tail_.load(std::memory_order_acquire) != head) {
          std::this_thread::yield();  // a push is linking a node behind `head`
          continue;
        }
        push(&stub_);
        next = head->next_.load(std::memory_order_acquire);
        if (next == nullptr) {
          std::this_thread::yield();  // a push got in before the stub and is linking
          continue;
        }
      }
      head_ = next;
      return head;
    }
  }

  // Consumer only. Sequentially consistent, for the sleeping handshake above.
  [[nodiscard]] bool empty() const noexcept {
    return head_ == &stub_ && tail_.load(std::memory_order_seq_cst) == &stub_;
  }

 private:
  // Three lines: producers write the stub's link (when the list is empty) and exchange the tail;
  // the head is the consumer's alone.
  alignas(64) InboxNode stub_;
  alignas(64) InboxNode* head_ = &stub_;
  alignas(64) std::atomic<InboxNode*> tail_{&stub_};
};

}  // namespace delayq::detail
