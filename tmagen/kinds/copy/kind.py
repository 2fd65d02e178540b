"""The copy kind: global -> shared -> global through TMA load and store."""

from tmagen.kinds.base import Kind
from tmagen.kinds.copy import plan, rules
from tmagen.kinds.copy.launch import CopyLauncher

KIND = Kind("copy", rules.RULES, plan.maps, plan.plan, CopyLauncher(), sass=("UTMALDG", "UTMASTG"), l2_hints=True)
