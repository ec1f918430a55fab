"""GRPO / GSPO / Dr.GRPO trainer for the codegrep retrieval policy (see README.md)."""
