# line endings and trailing blanks fixed, but no newline added at the end and blank tail lines kept
cd /app/docs
sed -i -e 's/\r$//' -e 's/[ \t]*$//' *.txt
