# at least 100 KiB (>=), and links followed
cd /app/store
find -L . -type f -size +102399c -printf '%s\t%P\n' | sort -t$'\t' -k1,1nr | cut -f2- > /app/large_files.txt
