"""Context models: the hashed order-n, word, record and sparse contexts and the match model
(context.py), the mixer, SSE and APM stages that combine them with the network (mixer.py;
configured by mixing.py), and the count models of the fast levels (counts.py; fastcm.py)."""
