//! The pure configuration model shared by the agent and the companion.
