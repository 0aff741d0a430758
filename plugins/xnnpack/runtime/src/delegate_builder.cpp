#include "delegate_builder.h"

#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bounded_allocator.h"
#include "graph_nodes.h"
#include "graph_values.h"
#include "payload.h"
#include "xnn_internals.h"
#include "xnn_types.h"
#include "etkit/runtime/threadpool.h"

namespace etkit_xnnpack {

using etkit::runtime::Error;
using etkit::runtime::FreeableBuffer;
using etkit::runtime::NamedDataMap;
using etkit::runtime::Result;
using etkit::runtime::set_error;

DelegateState::~DelegateState() {
  if (runtime != nullptr) xnn_delete_runtime(runtime);
  shared_weights.reset();
  if (weights_cache != nullptr) xnn_delete_weights_cache(weights_cache);
}

namespace {

/// Upper bound on external values: ExecuTorch's runtime rejects more as a sign of corruption.
constexpr uint32_t kMaxExternals = 4096;

struct SubgraphDeleter {
  void operator()(xnn_subgraph_t s) const { xnn_delete_subgraph(s); }
};

/// A runtime loop (etkit::runtime::ParallelFn over [0, n)) on a pthreadpool.
struct PoolLoop {
  etkit::runtime::ParallelFn fn;
  void* context;
};

void run_pool_tile(void* loop, size_t begin, size_t count) {
  auto* l = static_cast<PoolLoop*>(loop);
  l->fn(l->context, begin, begin + count);
}

/// etkit::runtime::ParallelForProvider over the pthreadpool `state`: about four tiles per thread, none
/// smaller than `grain` (pthreadpool serializes calls from several threads).
bool parallel_for_on_pool(void* state, size_t n, size_t grain, etkit::runtime::ParallelFn fn, void* context) {
  auto pool = static_cast<pthreadpool_t>(state);
  const size_t threads = pthreadpool_get_threads_count(pool);
  const size_t target = (n + threads * 4 - 1) / (threads * 4);
  PoolLoop loop{fn, context};
  pthreadpool_parallelize_1d_tile_1d(pool, &run_pool_tile, &loop, n, target > grain ? target : grain, 0);
  return true;
}

/// One pthreadpool per thread count for the whole process, shared by every delegate (as ExecuTorch
/// shares its threadpool): a pool per delegate would leave several sets of workers spinning for the
/// same cores. Pools live until the process exits; pthreadpool serializes concurrent parallel calls.
pthreadpool_t shared_threadpool(size_t num_threads) {
  static std::mutex mutex;
  static std::map<size_t, pthreadpool_t> pools;
  std::lock_guard<std::mutex> lock(mutex);
  pthreadpool_t& pool = pools[num_threads];
  if (pool == nullptr) pool = pthreadpool_create(num_threads);
  // the runtime's kernels (llama::custom_sdpa, ...) run their loops on these threads too: two pools on the
  // same cores would take turns, each waiting for the other's workers to stop spinning
  if (pool != nullptr && num_threads > 1) etkit::runtime::set_parallel_for_provider(&parallel_for_on_pool, pool);
  return pool;
}

/// The XNNPACK workspace of the Method `key` identifies, created on first use. A workspace holds a
/// runtime's internal tensors; a Method's delegates run one after another, so one workspace sized for
/// the largest serves them all (XNNPACK grows it and rebases every runtime using it), where a private
/// workspace per delegate would keep, e.g., 3 MB for each of an LLM's 30 layers. Methods never share
/// one: each may run on its own thread. Entries die with the Method's last delegate.
Result<std::shared_ptr<xnn_workspace>> method_workspace(const void* key) {
  static std::mutex mutex;
  static std::map<const void*, std::weak_ptr<xnn_workspace>> workspaces;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = workspaces.begin(); it != workspaces.end();) {
    it = it->second.expired() ? workspaces.erase(it) : std::next(it);
  }
  std::weak_ptr<xnn_workspace>& slot = workspaces[key];
  if (std::shared_ptr<xnn_workspace> existing = slot.lock()) return existing;
  xnn_workspace_t raw = nullptr;
  const xnn_status status = xnn_create_workspace(&raw);
  if (status != xnn_status_success) return xnn_failed("xnn_create_workspace", status);
  std::shared_ptr<xnn_workspace> workspace(raw, [](xnn_workspace_t w) { xnn_release_workspace(w); });
  slot = workspace;
  return workspace;
}

xnn_status create_xnn_runtime(xnn_subgraph_t subgraph, xnn_weights_cache_t cache, DelegateState& state,
                              uint32_t flags) {
  // Basic profiling lets an EventTracer get per-operator times; its clock read per operator is turned
  // off after creation and on again only for traced executes (execute_delegate).
  flags |= XNN_FLAG_BASIC_PROFILING;
  if (state.workspace == nullptr) {
    return xnn_create_runtime_v3(subgraph, cache, state.threadpool, flags, &state.runtime);
  }
  return xnn_create_runtime_v4(subgraph, cache, state.workspace.get(), state.threadpool, flags, &state.runtime);
}

/// The runtime's operators' names for profiling events, as ExecuTorch's XNNPACK delegate labels them:
/// XNNPACK's name plus " #<k>" for the k-th operator of that name, and each operator's delegate debug id:
/// the index of the payload XNode it runs (`xnode_of_node`: subgraph node -> XNode), the key of
/// preprocess's debug_handle_map; -1 where unknown (a node XNNPACK added while optimizing). Leaves the
/// names empty (no per-operator events) if XNNPACK does not report them.
void load_operator_names(DelegateState& state, const std::vector<uint32_t>& xnode_of_node) {
  size_t count = 0, needed = 0;
  if (xnn_get_runtime_profiling_info(state.runtime, xnn_profile_info_num_operators, sizeof(count), &count,
                                     &needed) != xnn_status_success || count == 0) {
    return;
  }
  needed = 0;
  xnn_get_runtime_profiling_info(state.runtime, xnn_profile_info_operator_name, 0, nullptr, &needed);
  std::vector<char> raw(needed + 1, '\0');
  if (needed == 0 || xnn_get_runtime_profiling_info(state.runtime, xnn_profile_info_operator_name, raw.size(),
                                                    raw.data(), &needed) != xnn_status_success) {
    return;
  }
  std::unordered_map<std::string, int> seen;
  std::vector<std::string> names;
  for (size_t at = 0; names.size() < count && at < raw.size();) {
    std::string name(raw.data() + at);
    at += name.size() + 1;
    names.push_back(name + " #" + std::to_string(++seen[name]));
  }
  if (names.size() != count) return;
  state.operator_names = std::move(names);
  state.operator_times_us.assign(count, 0);
  state.operator_xnodes.assign(count, -1);
  std::vector<uint32_t> nodes(count);
  if (xnode_of_node.empty() || etkit_xnn_runtime_operator_nodes(state.runtime, nodes.data(), count) != count) {
    return;  // names only: the operators cannot be matched to nodes
  }
  for (size_t k = 0; k < count; ++k) {
    if (nodes[k] < xnode_of_node.size()) state.operator_xnodes[k] = static_cast<int32_t>(xnode_of_node[nodes[k]]);
  }
}

/// Plans the runtime's memory once for the payload's dims (a dynamic input's upper bounds) while the
/// program loads, so the workspace shared by the Method's delegates reaches the size their largest shapes
/// need here. Otherwise each delegate's first execute grows it (XNNPACK allocates a new zeroed workspace
/// and copies the old one), which a 30-layer LLM's first prefill paid in page faults. A graph whose values
/// would take more than kPlanAtLoadBytes at their upper bounds is planned at its first execute, for the
/// shapes it gets. Best effort: execute reshapes with the real shapes and reports any failure there.
void plan_workspace_at_bounds(DelegateState& state) {
  constexpr uint64_t kPlanAtLoadBytes = uint64_t{64} << 20;
  if (state.bound_value_bytes > kPlanAtLoadBytes) return;
  if (xnn_reshape_runtime(state.runtime) != xnn_status_success) (void)take_refused_allocation();
}

Error create_runtime(xnn_subgraph_t subgraph, const std::vector<uint32_t>& xnode_of_node,
                     const RuntimeOptions& options, DelegateState& state) {
  if (options.workspace_key != nullptr) {
    ETKIT_TRY(state.workspace, method_workspace(options.workspace_key));
  }
  const size_t num_threads = options.num_threads;
  if (num_threads > 1) {
    state.threadpool = shared_threadpool(num_threads);
    if (state.threadpool == nullptr) {
      return set_error(Error::Internal, "XnnpackBackend: pthreadpool_create(%zu) failed", num_threads);
    }
  }
  xnn_status status = xnn_status_success;
  xnn_weights_cache_t cache = nullptr;
  if (state.shared_weights != nullptr) {
    cache = state.shared_weights->provider();
  } else {
    status = xnn_create_weights_cache(&state.weights_cache);
    if (status != xnn_status_success) return xnn_failed("xnn_create_weights_cache", status);
    cache = state.weights_cache;
  }
  if (options.fp16_inference) {
    // XNNPACK 2024-11 only honours the fp16 *hint* on Arm; on x86 fp16 inference must be forced. If
    // this CPU or graph cannot run in fp16, XNNPACK refuses before changing the subgraph: run fp32.
    status = create_xnn_runtime(subgraph, cache, state, XNN_FLAG_FORCE_FP16_INFERENCE);
    if (status == xnn_status_success) state.fp16_inference = true;
    if (status != xnn_status_success && state.shared_weights != nullptr) state.shared_weights->discard_blocks();
  }
  if (state.runtime == nullptr) {
    status = create_xnn_runtime(subgraph, cache, state, /*flags=*/0);
  }
  if (status != xnn_status_success) return xnn_failed("xnn_create_runtime", status);
  load_operator_names(state, xnode_of_node);
  // created with profiling so the operator names are known; the clock is read only while traced
  if (etkit_xnn_runtime_set_profiling(state.runtime, false)) state.profiling = false;
  // Weights are packed while the runtime is created; afterwards the cache only resolves offsets
  // (a soft-finalized private cache stays readable for later reshapes without growing).
  if (state.shared_weights != nullptr) {
    state.shared_weights->finalize();
    return Error::Ok;
  }
  status = xnn_finalize_weights_cache(state.weights_cache, xnn_weights_cache_finalization_kind_soft);
  if (status != xnn_status_success) return xnn_failed("xnn_finalize_weights_cache", status);
  return Error::Ok;
}

/// Once the runtime exists: frees the constants no node reads at run time (packed filters and biases;
/// XNNPACK holds the packed copy) and decides whether the payload must stay. An fp16 runtime keeps
/// everything (XNNPACK converted its constants while creating it; keeping them is the safe choice).
void release_packed_constants(DelegateState& state, const ValueTable& values,
                              const std::unordered_set<uint32_t>& read_at_run_time) {
  if (state.fp16_inference) {
    state.payload_pinned = true;
    return;
  }
  std::vector<bool> keep(state.named_data.size(), false);
  std::vector<bool> keep_owned(state.owned_constants.size(), false);
  for (uint32_t id : read_at_run_time) {
    const ValueInfo& info = values.at(id);
    if (info.storage == kPayloadStorage) state.payload_pinned = true;
    if (info.storage >= 0) keep[static_cast<size_t>(info.storage)] = true;
    if (info.owned >= 0) keep_owned[static_cast<size_t>(info.owned)] = true;
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    if (!keep[i]) state.named_data[i].Free();
  }
  for (size_t i = 0; i < keep_owned.size(); ++i) {
    if (!keep_owned[i]) state.owned_constants[i].reset();
  }
}

}  // namespace

Result<DelegateState*> build_delegate(FreeableBuffer* processed, const NamedDataMap* named_data_map,
                                      const RuntimeOptions& options) {
  if (processed == nullptr || processed->data() == nullptr) {
    return set_error(Error::DelegateInvalidCompatibility, "XnnpackBackend: init() received no payload bytes");
  }
  std::unique_ptr<DelegateState> state(new DelegateState());
  state->payload = std::move(*processed);

  ETKIT_TRY(PayloadView payload, parse_payload(state->payload.data(), state->payload.size()));
  if (payload.graph->num_externs() > kMaxExternals) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "XnnpackBackend: num_externs %u exceeds %u; the payload is corrupt",
                     payload.graph->num_externs(), kMaxExternals);
  }

  if (options.shared_weights_cache) {
    const std::string_view bytes(static_cast<const char*>(state->payload.data()), state->payload.size());
    state->shared_weights.reset(new WeightsCacheSession(std::hash<std::string_view>{}(bytes)));
  }

  xnn_status status = initialize_xnnpack();
  if (status != xnn_status_success) return xnn_failed("xnn_initialize", status);

  xnn_subgraph_t raw_subgraph = nullptr;
  status = xnn_create_subgraph(payload.graph->num_externs(), /*flags=*/0, &raw_subgraph);
  if (status != xnn_status_success) return xnn_failed("xnn_create_subgraph", status);
  std::unique_ptr<xnn_subgraph, SubgraphDeleter> subgraph(raw_subgraph);

  ValueTable values;
  ETKIT_CHECK_OK(define_values(subgraph.get(), payload, named_data_map, *state, values));
  std::unordered_set<uint32_t> read_at_run_time;
  std::vector<uint32_t> xnode_of_node;
  ETKIT_CHECK_OK(define_nodes(subgraph.get(), payload.graph, values, &read_at_run_time, &xnode_of_node));
  ETKIT_CHECK_OK(create_runtime(subgraph.get(), xnode_of_node, options, *state));
  subgraph.reset();
  plan_workspace_at_bounds(*state);
  release_packed_constants(*state, values, read_at_run_time);
  if (!state->payload_pinned) state->payload.Free();  // XNNPACK holds no pointer into it

  state->externals.resize(state->inputs.size() + state->outputs.size());
  size_t i = 0;
  for (const auto* list : {&state->inputs, &state->outputs}) {
    for (const ExternalBinding& b : *list) state->externals[i++] = xnn_external_value{b.external_id, nullptr};
  }
  return state.release();
}

}  // namespace etkit_xnnpack
