// An intrusive red-black tree: the nodes live in the caller's memory and carry an `RbLink`.
//
// Terms:
//   link      three words inside a node: the parent pointer with the colour in its low bit,
//             and the two children. A node may carry several links and sit in several trees.
//   traits    how the tree reaches a node (`Traits::link(Node*)`, `Traits::node(RbLink*)`, so
//             the link can be anywhere in the node, as Linux's `rb_node` with container_of)
//             and the node's key (`Traits::key(const Node&)`, ordered by `<`). Equal keys are
//             allowed: a new node goes after the nodes with the same key (a multiset).
//   augment   optional data kept per node from its subtree (e.g. the largest run below it):
//             `Augment::update(Node*, const Node* left, const Node* right)` recomputes a node
//             from its children and `Augment::holds(...)` says whether it is up to date. The
//             default, NoAugment, compiles every call away.
//   observer  told of every node visited by a search and of every rotation, so that a user
//             can count the tree's work; the default, NoObserver, compiles away.
//
// Operations: insert, erase, find, lower_bound (the first node not less than a key: FreeBSD's
// RB_NFIND), upper_bound, first, last, next, prev — O(log n) each — and check_invariants().
// The balancing follows Cormen et al., "Introduction to Algorithms", ch. 13, with nullptr as
// the black leaf. Needs only the standard library.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace pagemalloc::rb {

struct RbLink {
  std::uintptr_t parent_and_colour = 0;  // parent address | kRed; nullptr parent: the root
  RbLink* left = nullptr;
  RbLink* right = nullptr;
};
static_assert(alignof(RbLink) >= 2, "the colour lives in the parent pointer's low bit");

template <class T>
concept RbTraits = requires(typename T::Node* n, const typename T::Node& cn, RbLink* l,
                            const typename T::Key& k) {
  { T::link(n) } -> std::same_as<RbLink*>;
  { T::node(l) } -> std::same_as<typename T::Node*>;
  { T::key(cn) } -> std::convertible_to<typename T::Key>;
  { k < k } -> std::convertible_to<bool>;
};

// Reaches a node through one of its base classes that derives from RbLink (a "tag" base:
// `struct ByAddress : RbLink {};`), so one node can hold several links without offsetof.
template <class NodeT, class LinkBase>
struct LinkAsBase {
  using Node = NodeT;
  static_assert(std::derived_from<LinkBase, RbLink> && std::derived_from<Node, LinkBase>);
  static RbLink* link(Node* n) { return static_cast<LinkBase*>(n); }
  static Node* node(RbLink* l) { return static_cast<Node*>(static_cast<LinkBase*>(l)); }
};

struct NoAugment {
  static constexpr bool kEnabled = false;
  template <class Node>
  static void update(Node*, const Node*, const Node*) {}
  template <class Node>
  static bool holds(const Node*, const Node*, const Node*) {
    return true;
  }
};

struct NoObserver {
  void visited() {}
  void rotated() {}
};

template <class Augment>
inline constexpr bool kAugmented = requires {
  requires Augment::kEnabled;
};

template <RbTraits Traits, class Augment = NoAugment, class Observer = NoObserver>
class RbTree {
 public:
  using Node = typename Traits::Node;
  using Key = typename Traits::Key;

  constexpr RbTree() = default;
  constexpr explicit RbTree(Observer observer) : observer_(observer) {}
  RbTree(const RbTree&) = delete;
  RbTree& operator=(const RbTree&) = delete;

  [[nodiscard]] bool empty() const { return root_ == nullptr; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] Node* root() const { return owner(root_); }
  Observer& observer() { return observer_; }

  // Requires: `node` is in no tree that uses this link.
  void insert(Node* node) {
    RbLink* z = Traits::link(node);
    const Key key = Traits::key(*node);
    RbLink* parent = nullptr;
    bool go_left = false;
    for (RbLink* x = root_; x != nullptr; x = go_left ? x->left : x->right) {
      observer_.visited();
      parent = x;
      go_left = key < key_of(x);
    }
    z->left = z->right = nullptr;
    z->parent_and_colour = reinterpret_cast<std::uintptr_t>(parent) | kRed;
    if (parent == nullptr) {
      root_ = z;
    } else if (go_left) {
      parent->left = z;
    } else {
      parent->right = z;
    }
    ++size_;
    update_path(z);
    insert_fixup(z);
  }

  // Requires: `node` is in this tree.
  void erase(Node* node) {
    RbLink* z = Traits::link(node);
    RbLink* x;         // the node that moves up into the removed position (may be null)
    RbLink* x_parent;  // its parent after the move
    bool removed_black;
    if (z->left == nullptr || z->right == nullptr) {
      x = z->left != nullptr ? z->left : z->right;
      x_parent = parent_of(z);
      removed_black = !is_red(z);
      transplant(z, x);
    } else {
      RbLink* y = leftmost(z->right);  // z's successor takes z's place and colour
      removed_black = !is_red(y);
      x = y->right;
      if (parent_of(y) == z) {
        x_parent = y;
      } else {
        x_parent = parent_of(y);
        transplant(y, x);
        y->right = z->right;
        set_parent(y->right, y);
      }
      transplant(z, y);
      y->left = z->left;
      set_parent(y->left, y);
      set_red(y, is_red(z));
    }
    --size_;
    update_path(x_parent);
    if (removed_black) erase_fixup(x, x_parent);
  }

  [[nodiscard]] Node* first() const { return root_ == nullptr ? nullptr : owner(leftmost(root_)); }
  [[nodiscard]] Node* last() const { return root_ == nullptr ? nullptr : owner(rightmost(root_)); }

  // The node after / before `node` in key order, or nullptr.
  Node* next(Node* node) {
    RbLink* l = Traits::link(node);
    if (l->right != nullptr) return owner(leftmost(l->right));
    RbLink* p = parent_of(l);
    while (p != nullptr && l == p->right) {
      observer_.visited();
      l = p;
      p = parent_of(p);
    }
    return owner(p);
  }
  Node* prev(Node* node) {
    RbLink* l = Traits::link(node);
    if (l->left != nullptr) return owner(rightmost(l->left));
    RbLink* p = parent_of(l);
    while (p != nullptr && l == p->left) {
      observer_.visited();
      l = p;
      p = parent_of(p);
    }
    return owner(p);
  }

  // The first node whose key is not less than `key`, or nullptr.
  Node* lower_bound(const Key& key) {
    RbLink* found = nullptr;
    for (RbLink* x = root_; x != nullptr;) {
      observer_.visited();
      if (key_of(x) < key) {
        x = x->right;
      } else {
        found = x;
        x = x->left;
      }
    }
    return owner(found);
  }

  // The first node whose key is greater than `key`, or nullptr.
  Node* upper_bound(const Key& key) {
    RbLink* found = nullptr;
    for (RbLink* x = root_; x != nullptr;) {
      observer_.visited();
      if (key < key_of(x)) {
        found = x;
        x = x->left;
      } else {
        x = x->right;
      }
    }
    return owner(found);
  }

  // The first node whose key equals `key`, or nullptr.
  Node* find(const Key& key) {
    Node* n = lower_bound(key);
    return n != nullptr && !(key < Traits::key(*n)) ? n : nullptr;
  }

  // nullptr when the tree is well formed, otherwise what is wrong: parent links, the root's
  // colour, a red node with a red child, unequal black heights, keys out of order, the
  // node count, stale augmentation.
  [[nodiscard]] const char* check_invariants() const {
    if (root_ == nullptr) return size_ == 0 ? nullptr : "an empty tree has a nonzero size";
    if (parent_of(root_) != nullptr) return "the root has a parent";
    if (is_red(root_)) return "the root is red";
    std::size_t count = 0;
    int black_height = 0;
    if (const char* problem = check_subtree(root_, nullptr, nullptr, count, black_height))
      return problem;
    return count == size_ ? nullptr : "the node count disagrees with the size";
  }

 private:
  static constexpr std::uintptr_t kRed = 1;

  static Node* owner(RbLink* l) { return l == nullptr ? nullptr : Traits::node(l); }
  static Key key_of(RbLink* l) { return Traits::key(*Traits::node(l)); }
  static RbLink* parent_of(const RbLink* l) {
    return reinterpret_cast<RbLink*>(l->parent_and_colour & ~kRed);
  }
  static bool is_red(const RbLink* l) { return l != nullptr && (l->parent_and_colour & kRed); }
  static void set_red(RbLink* l, bool red) {
    l->parent_and_colour = (l->parent_and_colour & ~kRed) | (red ? kRed : 0);
  }
  static void set_parent(RbLink* l, RbLink* p) {
    if (l == nullptr) return;
    l->parent_and_colour = reinterpret_cast<std::uintptr_t>(p) | (l->parent_and_colour & kRed);
  }

  RbLink* leftmost(RbLink* l) {
    while (l->left != nullptr) {
      observer_.visited();
      l = l->left;
    }
    return l;
  }
  RbLink* rightmost(RbLink* l) {
    while (l->right != nullptr) {
      observer_.visited();
      l = l->right;
    }
    return l;
  }
  RbLink* leftmost(RbLink* l) const { return const_cast<RbTree*>(this)->leftmost(l); }
  RbLink* rightmost(RbLink* l) const { return const_cast<RbTree*>(this)->rightmost(l); }

  // Puts `v` (possibly null) where `u` hangs from its parent.
  void transplant(RbLink* u, RbLink* v) {
    RbLink* p = parent_of(u);
    if (p == nullptr) {
      root_ = v;
    } else if (u == p->left) {
      p->left = v;
    } else {
      p->right = v;
    }
    set_parent(v, p);
  }

  static void update_node(RbLink* l) {
    if constexpr (kAugmented<Augment>)
      Augment::update(Traits::node(l), owner(l->left), owner(l->right));
  }
  // Recomputes the augmentation from `l` up to the root (after a node came or went there).
  static void update_path(RbLink* l) {
    if constexpr (kAugmented<Augment>)
      for (; l != nullptr; l = parent_of(l)) update_node(l);
  }

  /*
   *       x                y
   *      / \              / \
   *     a   y    --->    x   c
   *        / \          / \
   *       b   c        a   b
   */
  void rotate_left(RbLink* x) {
    RbLink* y = x->right;
    x->right = y->left;
    set_parent(x->right, x);
    transplant(x, y);
    y->left = x;
    set_parent(x, y);
    update_node(x);
    update_node(y);
    observer_.rotated();
  }

  /*
   *         x            y
   *        / \          / \
   *       y   c  --->  a   x
   *      / \              / \
   *     a   b            b   c
   */
  void rotate_right(RbLink* x) {
    RbLink* y = x->left;
    x->left = y->right;
    set_parent(x->left, x);
    transplant(x, y);
    y->right = x;
    set_parent(x, y);
    update_node(x);
    update_node(y);
    observer_.rotated();
  }

  /*
   * z is red; restores "no red node has a red child" going up.
   *
   *  case 1 (uncle red): recolour      case 2 -> 3 (uncle black): rotate
   *        G(b)            g(r)              G(b)              P(b)
   *       /    \          /    \            /    \            /    \
   *     p(r)   u(r) --> P(b)   U(b)       p(r)   U(b) -->   z(r)   g(r)
   *     /              /                  /                           \
   *   z(r)           z(r)               z(r)                          U(b)
   */
  void insert_fixup(RbLink* z) {
    for (RbLink* p = parent_of(z); is_red(p); p = parent_of(z)) {
      RbLink* g = parent_of(p);  // exists: a red node is never the root
      if (p == g->left) {
        RbLink* uncle = g->right;
        if (is_red(uncle)) {
          set_red(p, false);
          set_red(uncle, false);
          set_red(g, true);
          z = g;
          continue;
        }
        if (z == p->right) {
          z = p;
          rotate_left(z);
          p = parent_of(z);
        }
        set_red(p, false);
        set_red(g, true);
        rotate_right(g);
      } else {
        RbLink* uncle = g->left;
        if (is_red(uncle)) {
          set_red(p, false);
          set_red(uncle, false);
          set_red(g, true);
          z = g;
          continue;
        }
        if (z == p->left) {
          z = p;
          rotate_right(z);
          p = parent_of(z);
        }
        set_red(p, false);
        set_red(g, true);
        rotate_left(g);
      }
    }
    set_red(root_, false);
  }

  // A black node left the path through x: x carries an extra black until it can be dropped.
  // With w the sibling of x:
  //   case 1  w red:                    rotate at the parent, making w black (then 2, 3 or 4)
  //   case 2  w black, both its children black: w turns red, the extra black moves up
  //   case 3  w black, near child red:  rotate at w (becomes case 4)
  //   case 4  w black, far child red:   rotate at the parent, recolour; done
  void erase_fixup(RbLink* x, RbLink* parent) {
    while (x != root_ && !is_red(x)) {
      if (x == parent->left) {
        RbLink* w = parent->right;
        if (is_red(w)) {
          set_red(w, false);
          set_red(parent, true);
          rotate_left(parent);
          w = parent->right;
        }
        if (!is_red(w->left) && !is_red(w->right)) {
          set_red(w, true);
          x = parent;
          parent = parent_of(x);
        } else {
          if (!is_red(w->right)) {
            set_red(w->left, false);
            set_red(w, true);
            rotate_right(w);
            w = parent->right;
          }
          set_red(w, is_red(parent));
          set_red(parent, false);
          set_red(w->right, false);
          rotate_left(parent);
          x = root_;
        }
      } else {
        RbLink* w = parent->left;
        if (is_red(w)) {
          set_red(w, false);
          set_red(parent, true);
          rotate_right(parent);
          w = parent->left;
        }
        if (!is_red(w->left) && !is_red(w->right)) {
          set_red(w, true);
          x = parent;
          parent = parent_of(x);
        } else {
          if (!is_red(w->left)) {
            set_red(w->right, false);
            set_red(w, true);
            rotate_left(w);
            w = parent->left;
          }
          set_red(w, is_red(parent));
          set_red(parent, false);
          set_red(w->left, false);
          rotate_right(parent);
          x = root_;
        }
      }
    }
    if (x != nullptr) set_red(x, false);
  }

  // Checks the subtree at l, whose keys must lie in [*low, *high] (null: unbounded); adds its
  // nodes to count and sets black_height (leaves count as one).
  const char* check_subtree(const RbLink* l, const RbLink* low, const RbLink* high,
                            std::size_t& count, int& black_height) const {
    if (l == nullptr) {
      black_height = 1;
      return nullptr;
    }
    ++count;
    if (count > size_) return "more nodes are reachable than the size says (a cycle?)";
    const Key key = key_of(const_cast<RbLink*>(l));
    if (low != nullptr && key < key_of(const_cast<RbLink*>(low))) return "keys out of order";
    if (high != nullptr && key_of(const_cast<RbLink*>(high)) < key) return "keys out of order";
    for (const RbLink* child : {l->left, l->right}) {
      if (child == nullptr) continue;
      if (parent_of(child) != l) return "a child's parent link is wrong";
      if (is_red(l) && is_red(child)) return "a red node has a red child";
    }
    int left_height = 0, right_height = 0;
    if (const char* p = check_subtree(l->left, low, l, count, left_height)) return p;
    if (const char* p = check_subtree(l->right, l, high, count, right_height)) return p;
    if (left_height != right_height) return "black heights differ";
    black_height = left_height + (is_red(l) ? 0 : 1);
    if constexpr (kAugmented<Augment>) {
      if (!Augment::holds(Traits::node(const_cast<RbLink*>(l)), owner(l->left), owner(l->right)))
        return "a node's augmentation is stale";
    }
    return nullptr;
  }

  RbLink* root_ = nullptr;
  std::size_t size_ = 0;
  [[no_unique_address]] Observer observer_{};
};

}  // namespace pagemalloc::rb
