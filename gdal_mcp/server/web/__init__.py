"""HTTP beside /mcp: token, Host and Origin guards, /healthz, downloads (/files/…) and the approval console."""
