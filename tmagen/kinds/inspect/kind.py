"""The inspect kind: one TMA load of each tensor's box, its raw shared memory copied out."""

from tmagen.kinds.base import Kind
from tmagen.kinds.inspect import plan, rules
from tmagen.kinds.inspect.launch import InspectLauncher

KIND = Kind("inspect", rules.RULES, plan.maps, plan.plan, InspectLauncher(), sass=("UTMALDG",), grid_launch=False,
            l2_hints=True, reduces=True)
