"""What the server takes, learned by the run: the rate requests start at (pacing, rate),
how many are in flight (limiter), and the calls made within both (concurrency). A
command asks for one ``concurrency.Capacity``."""
