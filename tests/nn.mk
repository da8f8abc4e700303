# tests/nn.mk — owned by one helper; see the lead's notes.
