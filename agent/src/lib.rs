//! The node side of mco-agent.
