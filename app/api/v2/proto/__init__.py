"""The V2 protocol's gRPC messages and service: ``grpc_predict_v2.proto`` and the code generated
from it (the command is at the top of the ``.proto``; never edited by hand)."""
