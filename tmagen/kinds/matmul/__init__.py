"""The matmul kernel kind: its spec section, rules, planning and launcher."""
