# sorted by name instead of by size
cd /app/store
find . -type f -size +102400c -printf '%P\n' | sort > /app/large_files.txt
