# The design this build of pagemalloc is assembled from: a preset (allocator/src/design/presets.h)
# and the options that change one of its choices each. Writes build_config.h (from
# allocator/src/design/build_config.h.in) into the build tree; sets PAGEMALLOC_RUNS_RESOLVED, the run
# manager the library ends up with.
#
#   PAGEMALLOC_PRESET              default | je2008-trees | je2008-fixed | je2008-pagemap
#   PAGEMALLOC_RUNS                pagemap | hybrid | rbtree
#   PAGEMALLOC_THREAD_CACHES       ON | OFF
#   PAGEMALLOC_TRANSFER_STASH      ON | OFF
#   PAGEMALLOC_ARENAS              0 (one per two CPUs) | N
#   PAGEMALLOC_MAX_SMALL_SIZE      2048 | 16384 | 65536
#   PAGEMALLOC_MAX_MEDIUM_SIZE     0 | 262144 | 524288 | 1048576
#   PAGEMALLOC_MEDIUM_SPACING      0 (page-exact) | 4 | 8 | 16 classes per doubling
#   PAGEMALLOC_RELEASE_CURRENT_SLAB ON | OFF
#   PAGEMALLOC_LARGE_RUN_CACHE     ON | OFF
#   PAGEMALLOC_DIRTY_RUNS_FIRST    ON | OFF
#   PAGEMALLOC_ALLOCATED_RUNS_TREE ON | OFF
#   PAGEMALLOC_VALIDATE_FREE       ON | OFF
#   PAGEMALLOC_CHUNK_SIZE          1048576 | 2097152
# Each choice left empty (the default) keeps the preset's. Sets PAGEMALLOC_LG_CHUNK_SIZE too,
# for pagemap/chunk_size.h: every layer counts in chunks of the one size.

set(PAGEMALLOC_PRESET "default" CACHE STRING
    "the design: default | je2008-trees | je2008-fixed | je2008-pagemap")
set_property(CACHE PAGEMALLOC_PRESET PROPERTY STRINGS default je2008-trees je2008-fixed je2008-pagemap)
set(PAGEMALLOC_RUNS "" CACHE STRING "run manager: pagemap | hybrid | rbtree (empty: the preset's)")
set_property(CACHE PAGEMALLOC_RUNS PROPERTY STRINGS "" pagemap hybrid rbtree)
set(PAGEMALLOC_THREAD_CACHES "" CACHE STRING "per-thread caches of small blocks: ON | OFF (empty: the preset's)")
set(PAGEMALLOC_TRANSFER_STASH "" CACHE STRING "arenas stash the regions caches return: ON | OFF (empty: the preset's)")
set(PAGEMALLOC_ARENAS "" CACHE STRING "automatic arenas by default: 0 (one per two CPUs) or N (empty: the preset's)")
set(PAGEMALLOC_MAX_SMALL_SIZE "" CACHE STRING "largest slab size: 2048 | 16384 | 65536 (empty: the preset's)")
set(PAGEMALLOC_MAX_MEDIUM_SIZE "" CACHE STRING
    "largest medium class, kept in the thread caches: 0 | 262144 | 524288 | 1048576 (empty: the preset's)")
set(PAGEMALLOC_MEDIUM_SPACING "" CACHE STRING
    "medium classes per doubling: 0 (page-exact) | 4 | 8 | 16 (empty: the preset's)")
set(PAGEMALLOC_RELEASE_CURRENT_SLAB "" CACHE STRING
    "release a bin's current slab when it empties: ON | OFF (empty: the preset's)")
set(PAGEMALLOC_LARGE_RUN_CACHE "" CACHE STRING
    "arenas cache a few freed large blocks for reuse: ON | OFF (empty: the preset's)")
set(PAGEMALLOC_DIRTY_RUNS_FIRST "" CACHE STRING
    "the fit reuses wholly dirty free runs before fresh or purged pages: ON | OFF (empty: the preset's)")
set(PAGEMALLOC_ALLOCATED_RUNS_TREE "" CACHE STRING
    "keep allocated runs in an address tree, searched for a large block's length: ON | OFF (empty: the preset's)")
set(PAGEMALLOC_VALIDATE_FREE "" CACHE STRING
    "every free searches a tree of its arena's chunks first (OS X's malloc zone, 2008): ON | OFF (empty: the preset's)")
set(PAGEMALLOC_CHUNK_SIZE "" CACHE STRING "chunk size in bytes: 1048576 | 2097152 (empty: the preset's)")

# preset name -> C++ type, and its run manager (allocator/src/design/presets.h; build_config.h checks
# that the two agree).
set(preset_types default DefaultConfig je2008-trees Je2008TreesConfig
                 je2008-fixed Je2008FixedConfig je2008-pagemap Je2008PagemapConfig)
set(preset_runs default pagemap je2008-trees rbtree je2008-fixed hybrid je2008-pagemap pagemap)
set(preset_lg_chunk_sizes default 21 je2008-trees 20 je2008-fixed 20 je2008-pagemap 20)
list(FIND preset_types "${PAGEMALLOC_PRESET}" preset_at)
if(preset_at EQUAL -1 OR NOT PAGEMALLOC_PRESET MATCHES "^[a-z0-9-]+$")
  message(FATAL_ERROR "PAGEMALLOC_PRESET=${PAGEMALLOC_PRESET}: unknown; use default, "
                      "je2008-trees, je2008-fixed or je2008-pagemap")
endif()
math(EXPR preset_at "${preset_at} + 1")
list(GET preset_types ${preset_at} PAGEMALLOC_PRESET_TYPE)
list(FIND preset_runs "${PAGEMALLOC_PRESET}" runs_at)
math(EXPR runs_at "${runs_at} + 1")
list(GET preset_runs ${runs_at} preset_run_manager)
list(FIND preset_lg_chunk_sizes "${PAGEMALLOC_PRESET}" chunk_at)
math(EXPR chunk_at "${chunk_at} + 1")
list(GET preset_lg_chunk_sizes ${chunk_at} PAGEMALLOC_LG_CHUNK_SIZE)

set(PAGEMALLOC_DESIGN_OVERRIDES "")
set(run_manager_types pagemap PagemapRuns hybrid HybridRuns rbtree RbtreeRuns)
if(PAGEMALLOC_RUNS STREQUAL "")
  set(PAGEMALLOC_RUNS_RESOLVED ${preset_run_manager})
else()
  list(FIND run_manager_types "${PAGEMALLOC_RUNS}" runs_type_at)
  if(runs_type_at EQUAL -1 OR NOT PAGEMALLOC_RUNS MATCHES "^[a-z]+$")
    message(FATAL_ERROR "PAGEMALLOC_RUNS=${PAGEMALLOC_RUNS}: unknown; use pagemap, hybrid or rbtree")
  endif()
  set(PAGEMALLOC_RUNS_RESOLVED ${PAGEMALLOC_RUNS})
endif()
# In the cache too, for the scripts that read what a build tree holds (real_programs.py).
set(PAGEMALLOC_RUNS_RESOLVED ${PAGEMALLOC_RUNS_RESOLVED} CACHE INTERNAL "the run manager built")
if(NOT PAGEMALLOC_RUNS STREQUAL "")
  math(EXPR runs_type_at "${runs_type_at} + 1")
  list(GET run_manager_types ${runs_type_at} runs_type)
  string(APPEND PAGEMALLOC_DESIGN_OVERRIDES
         "  template <class Pal>\n  using Runs = ${runs_type}<Pal>;\n")
endif()

# design_override(OPTION MEMBER KIND): MEMBER = the option's value, if it has one. KIND: bool
# (ON/OFF) or a list of the values allowed.
function(design_override option member)
  set(value "${${option}}")
  if(value STREQUAL "")
    return()
  endif()
  if(ARGV2 STREQUAL "bool")
    if(value)
      set(text true)
    else()
      set(text false)
    endif()
  else()
    set(allowed ${ARGN})
    if(NOT value IN_LIST allowed AND NOT (allowed STREQUAL "count" AND value MATCHES "^[0-9]+$"))
      list(JOIN allowed " " allowed_text)
      message(FATAL_ERROR "${option}=${value}: use one of ${allowed_text}")
    endif()
    set(text "${value}")
  endif()
  set(PAGEMALLOC_DESIGN_OVERRIDES
      "${PAGEMALLOC_DESIGN_OVERRIDES}  static constexpr decltype(${PAGEMALLOC_PRESET_TYPE}::${member}) ${member} = ${text};\n"
      PARENT_SCOPE)
endfunction()
design_override(PAGEMALLOC_THREAD_CACHES kThreadCaches bool)
design_override(PAGEMALLOC_TRANSFER_STASH kTransferStash bool)
design_override(PAGEMALLOC_ARENAS kArenas count)
design_override(PAGEMALLOC_MAX_SMALL_SIZE kMaxSmallSize 2048 16384 65536)
design_override(PAGEMALLOC_MAX_MEDIUM_SIZE kMaxMediumSize 0 262144 524288 1048576)
design_override(PAGEMALLOC_MEDIUM_SPACING kMediumClassesPerDoubling 0 4 8 16)
design_override(PAGEMALLOC_RELEASE_CURRENT_SLAB kReleaseCurrentSlab bool)
design_override(PAGEMALLOC_LARGE_RUN_CACHE kLargeRunCache bool)
design_override(PAGEMALLOC_DIRTY_RUNS_FIRST kDirtyRunsFirst bool)
design_override(PAGEMALLOC_ALLOCATED_RUNS_TREE kAllocatedRunsTree bool)
design_override(PAGEMALLOC_VALIDATE_FREE kValidateFree bool)
if(NOT PAGEMALLOC_CHUNK_SIZE STREQUAL "")
  if(PAGEMALLOC_CHUNK_SIZE STREQUAL "1048576")
    set(PAGEMALLOC_LG_CHUNK_SIZE 20)
  elseif(PAGEMALLOC_CHUNK_SIZE STREQUAL "2097152")
    set(PAGEMALLOC_LG_CHUNK_SIZE 21)
  else()
    message(FATAL_ERROR "PAGEMALLOC_CHUNK_SIZE=${PAGEMALLOC_CHUNK_SIZE}: use one of 1048576 2097152")
  endif()
  string(APPEND PAGEMALLOC_DESIGN_OVERRIDES
         "  static constexpr std::size_t kLgChunkSize = ${PAGEMALLOC_LG_CHUNK_SIZE};\n")
endif()

if(PAGEMALLOC_TRACE_RUNS)
  set(PAGEMALLOC_TRACE_INCLUDE "#include \"pagemap/tracing/tracing_runs.h\"")
  set(PAGEMALLOC_SELECTED_RUNS "TracingRuns<DesignRuns<Config, Pal>>")
else()
  set(PAGEMALLOC_TRACE_INCLUDE "")
  set(PAGEMALLOC_SELECTED_RUNS "DesignRuns<Config, Pal>")
endif()
configure_file(${PROJECT_SOURCE_DIR}/allocator/src/design/build_config.h.in
               ${PROJECT_BINARY_DIR}/generated/build_config.h @ONLY)
math(EXPR chunk_kib "1 << (${PAGEMALLOC_LG_CHUNK_SIZE} - 10)")
message(STATUS "pagemalloc design: ${PAGEMALLOC_PRESET}, run manager ${PAGEMALLOC_RUNS_RESOLVED}, "
               "chunks of ${chunk_kib} KiB")
