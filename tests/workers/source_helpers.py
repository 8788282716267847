"""What the static pod sources' tests (``filesource``, ``httpsource``) read."""

WEB_POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx:1.25
"""
