"""What runs inside the user's own kernel after ``%load_ext jupyter_remote_hw``: the
``%%remote`` magics, the remote kernels they run cells on, the ipywidgets picker, and
the rich output of a shared kernel made safe to show."""
