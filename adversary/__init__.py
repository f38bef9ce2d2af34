"""Workload generators: adversarial and benign traces for the theorems and figures (issues 4 and 6).

Every generator returns a validated :mod:`kvcore.traces` trace, takes a ``seed`` (int or numpy Generator) when it
is random, and cites the construction it implements.  Adaptive adversaries drive a policy through the public
:class:`kvcore.engine.RMSimulator` / :class:`kvcore.engine.NMSimulator` interface only.  Hypothesis strategies live
in :mod:`adversary.strategies` (imported on demand, so the generators do not need hypothesis at import time).
"""

from .access_graphs import (adversarial_walk, cycle_access_graph, grid_access_graph, path_access_graph,
                            random_access_graph, random_walk, star_access_graph, tree_access_graph,
                            walk_follows_edges)
from .constructions import CONSTRUCTIONS, Construction, construction, constructions
from .counterexamples import (future_mass_counterexample, position_cost_counterexample, thm4_nm_counterexample,
                              unrequested_refresh_counterexample, varying_cost_counterexample)
from .block_workload import (AnchoredWorkloadParams, BlockWorkload, BlockWorkloadParams, block_capacity, decode_block,
                             encode_block, generate_anchored_workload, generate_block_workload)
from .decoy_sleeper import (DecoyRoles, SleeperBlock, decoy_and_sleeper, decoy_and_sleeper_rm,
                            decoy_and_sleeper_rm_blocks, decoy_and_sleeper_roles)
from .lfu_priming import lfu_priming, lfu_priming_attention, lfu_priming_attention_targets
from .lower_bounds import (adaptive_k_plus_one, adaptive_k_plus_one_nm, cyclic_k_plus_one, marking_phases,
                           oblivious_k_plus_one_nm, phase_starts, second_chance_breaker, two_new_per_phase,
                           uniform_k_plus_one)
from .persistence import (attention_sinks, enforce_chain_persistence, enforce_persistence, heavy_union_size, idle_token_spike,
                          observed_union_max, persistence_holds, persistence_violations, persistent_attention,
                          stationary_zipf_trace, tail_mass, tail_mass_per_step, zipf_focus_attention, zipf_weights)
from .ties import tie_targeted_trace
from .topics import TopicShiftTrace, topic_shift
from .workloads import (adversarial_and_benign, broad_and_sharp, dirichlet_attention, paused_sinks, sink_workloads,
                        two_entry_traces)

__all__ = [
    "CONSTRUCTIONS", "Construction", "construction", "constructions", "future_mass_counterexample",
    "position_cost_counterexample", "thm4_nm_counterexample", "unrequested_refresh_counterexample",
    "varying_cost_counterexample", "enforce_chain_persistence", "observed_union_max", "stationary_zipf_trace",
    "tie_targeted_trace", "two_new_per_phase", "attention_sinks", "paused_sinks", "adversarial_and_benign", "broad_and_sharp", "dirichlet_attention", "sink_workloads",
    "two_entry_traces",
    "AnchoredWorkloadParams", "generate_anchored_workload", "BlockWorkload", "BlockWorkloadParams", "block_capacity", "decode_block", "encode_block",
    "generate_block_workload",
    "DecoyRoles", "SleeperBlock", "TopicShiftTrace", "adaptive_k_plus_one", "adaptive_k_plus_one_nm", "oblivious_k_plus_one_nm",
    "adversarial_walk", "cycle_access_graph", "cyclic_k_plus_one", "decoy_and_sleeper", "decoy_and_sleeper_rm",
    "decoy_and_sleeper_rm_blocks", "decoy_and_sleeper_roles", "enforce_persistence", "grid_access_graph",
    "heavy_union_size", "idle_token_spike", "lfu_priming", "lfu_priming_attention", "lfu_priming_attention_targets",
    "marking_phases", "path_access_graph", "persistence_holds", "persistence_violations", "persistent_attention",
    "phase_starts", "random_access_graph", "random_walk", "second_chance_breaker", "star_access_graph", "tail_mass",
    "tail_mass_per_step", "topic_shift", "tree_access_graph", "uniform_k_plus_one", "walk_follows_edges", "zipf_focus_attention",
    "zipf_weights",
]
