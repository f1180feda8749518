"""Storage tiers as node resources and checkpoint costs."""
