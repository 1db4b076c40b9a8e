"""Hibernation from the server's side: the REST API's actions, each kernel's hibernate
time, and the timer that hibernates kernels left idle."""
