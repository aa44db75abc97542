"""What turns a loaded model and a request into an answer: input matrices, label sets, rankings, distributions, features."""
