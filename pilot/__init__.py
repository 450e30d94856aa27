"""The pilot: shipped to worker nodes, standard library only.

It describes the node it runs on, asks the Matcher for jobs of the
SubmitPools its queue serves, runs them and reports their state.
"""
