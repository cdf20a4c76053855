// ChunkTree: an arena's chunks in a red-black tree ordered by address, searched for every
// pointer freed in a design that validates frees (a Config's kValidateFree). On OS X in 2008,
// libSystem's free() asked each malloc zone's size() which zone a pointer was from, and
// jemalloc's zone answered with isalloc_validate(): a search of the arena's chunk tree (and,
// for a large block, of the allocated runs), then the free itself. pagemalloc finds a
// pointer's chunk in its address map and needs no such search; this tree puts the cost back
// where a study asks for 2008's conditions.
//
// Nodes come from a pool of their own (record_pool.h), reserved before a chunk is recorded.
// Callers hold the arena's lock.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagemap/record_pool.h"
#include "rbtree/rbtree.h"
#include "rbtree/run_trees.h"

namespace pagemalloc {

struct ChunkNode : AddressLink {
  std::byte* run;  // the chunk's first byte (the key; named as ByAddress expects)
};

class ChunkTree {
  // Counts the nodes a search looks at.
  struct VisitCounter {
    std::uint64_t* visits;
    void visited() { ++*visits; }
    void rotated() {}
  };
  using Tree = rb::RbTree<ByAddress<ChunkNode>, rb::NoAugment, VisitCounter>;

 public:
  constexpr ChunkTree() : tree_(VisitCounter{&visits_}) {}
  ChunkTree(const ChunkTree&) = delete;
  ChunkTree& operator=(const ChunkTree&) = delete;

  // False when no node could be had (the chunk is then not recorded).
  bool insert(std::byte* chunk) {
    if (!nodes_.reserve(nodes_.in_use() + 1)) return false;
    ChunkNode* node = nodes_.take();
    node->run = chunk;
    tree_.insert(node);
    return true;
  }
  void erase(std::byte* chunk) {
    ChunkNode* node = tree_.find(address_of(chunk));
    if (node == nullptr) return;
    tree_.erase(node);
    nodes_.give(node);
    if (nodes_.in_use() == 0) nodes_.release_all();
  }
  // The search a validated free makes: is `chunk` one of the arena's?
  bool contains(const void* chunk) {
    ++searches_;
    return tree_.find(address_of(chunk)) != nullptr;
  }

  [[nodiscard]] std::size_t size() const { return tree_.size(); }
  [[nodiscard]] std::uint64_t searches() const { return searches_; }
  [[nodiscard]] std::uint64_t nodes_visited() const { return visits_; }
  [[nodiscard]] std::size_t mapped_bytes() const { return nodes_.mapped_bytes(); }
  [[nodiscard]] const char* check_invariants() const {
    if (const char* problem = tree_.check_invariants()) return problem;
    if (tree_.size() != nodes_.in_use()) return "the chunk tree lost a node";
    return nullptr;
  }

 private:
  std::uint64_t visits_ = 0;
  std::uint64_t searches_ = 0;
  Tree tree_;
  RecordPool<ChunkNode> nodes_;
};

// Its stand-in in a design that does not validate frees: nothing kept, nothing searched.
struct NoChunkTree {
  static constexpr bool insert(std::byte*) { return true; }
  static constexpr void erase(std::byte*) {}
  static constexpr bool contains(const void*) { return false; }
  [[nodiscard]] static constexpr std::size_t size() { return 0; }
  [[nodiscard]] static constexpr std::uint64_t searches() { return 0; }
  [[nodiscard]] static constexpr const char* check_invariants() { return nullptr; }
};

}  // namespace pagemalloc
