# 100 KB read as 100000 bytes: the file of exactly 102400 bytes slips in
cd /app/store
find . -type f -size +100000c -printf '%s\t%P\n' | sort -t$'\t' -k1,1nr | cut -f2- > /app/large_files.txt
