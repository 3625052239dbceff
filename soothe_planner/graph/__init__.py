"""LangGraph integration: the StrangeLoop graph and the planner's node functions."""
