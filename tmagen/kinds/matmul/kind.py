"""The matmul kind: C = A B on the tensor cores, fed by TMA."""

from tmagen.kinds.base import Kind
from tmagen.kinds.matmul import plan, rules
from tmagen.kinds.matmul.launch import MatmulLauncher

KIND = Kind("matmul", rules.RULES, plan.maps, plan.plan, MatmulLauncher(), sass=("UTMALDG", "UTMASTG", "HGMMA"),
            grid_launch=False, driver_launch=True)
