# squeezes every run of blank lines, inside the text too
cd /app/docs
for f in *.txt; do
  sed -e 's/\r$//' -e 's/[ \t]*$//' "$f" | cat -s | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > "$f.tmp" && mv "$f.tmp" "$f"
done
