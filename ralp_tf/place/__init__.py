"""Applying a Plan on a live ParameterServerStrategy: the applier, the per-layer wrappers, sharded
variables, gradient codecs, the post-placement verifier, the policy registry and the isolation of
planners from the caller's strategy."""
from ralp_tf.place.applier import place, place_from_builder, placement, prepare, unplace
from ralp_tf.place.isolation import outside_strategy
from ralp_tf.place.policies import plan_with_policy, policy_names, register_policy, resolve_policy
from ralp_tf.place.verify import verify_placement

__all__ = ["place", "place_from_builder", "placement", "prepare", "plan_with_policy", "unplace", "outside_strategy", "policy_names",
           "register_policy", "resolve_policy", "verify_placement"]
