# the damaged files, but the lost one left out
mkdir -p /app/extracted && cd /app/extracted && tar -xzf /app/incoming/bundle.tar.gz
sha256sum -c SHA256SUMS 2>/dev/null | grep ': FAILED$' | sed 's/: FAILED$//' | sort > /app/bad_files.txt
