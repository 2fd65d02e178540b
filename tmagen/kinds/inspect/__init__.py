"""The inspect kernel kind: its spec section, rules, planning and launcher."""
