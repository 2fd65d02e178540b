"""The transpose kind: the last two dimensions turned through swizzled shared memory."""

from tmagen.kinds.base import Kind
from tmagen.kinds.transpose import plan, rules
from tmagen.kinds.transpose.launch import TransposeLauncher

KIND = Kind("transpose", rules.RULES, plan.maps, plan.plan, TransposeLauncher(), sass=("UTMALDG", "UTMASTG"),
            l2_hints=True)
