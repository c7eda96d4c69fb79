"""Time to find each known bug: every named scenario, several seeded runs, verdicts."""
