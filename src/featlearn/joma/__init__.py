"""Tian, Wang, Zhang, Chen, Du 2023, "JoMA: Demystifying Multilayer Transformers via JOint Dynamics of MLP
and Attention". Built so far: the Eq. 6 dynamics (Fig. 4) and Theorem 2 (``dynamics``)."""
