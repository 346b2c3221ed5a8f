"""Expert selection from router logits (softmax / sigmoid top-k), one Pallas kernel for decode steps."""

from dgjax.pallas.moe_routing.api import fused_requested, select_experts, use_kernel
from dgjax.pallas.moe_routing.ref import RoutingRule

__all__ = ["RoutingRule", "fused_requested", "select_experts", "use_kernel"]
